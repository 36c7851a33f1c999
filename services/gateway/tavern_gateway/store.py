"""The gateway's schema: accounts, web sessions, invites, sign-in attempts and imports."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tavern_gateway.accounts import Account, Role, digest, new_secret
from tavern_runtime import pg
from tavern_runtime.errors import ConcurrencyConflict, ValidationFailed


def _account(row: Any) -> Account:
    return Account(row["name"], row["principal"], row["role"])


class Store:
    def __init__(self, pool: pg.Pool) -> None:
        self.pool = pool

    async def has_owner(self) -> bool:
        return bool(await self.pool.fetchval("SELECT count(*) FROM gateway.accounts"))

    async def create_account(self, name: str, principal: str, role: Role, pw_hash: str) -> Account:
        try:
            row = await self.pool.fetchrow(
                "INSERT INTO gateway.accounts (name, principal, role, password_hash) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING *",
                name,
                principal,
                role,
                pw_hash,
            )
        except Exception as exc:  # the one-owner index: a second owner raced the first
            if "accounts_one_owner" in str(exc):
                raise ConcurrencyConflict("this install already has its owner") from None
            raise
        if row is None:
            raise ValidationFailed(f"the name {name!r} is taken", field="name")
        return _account(row)

    async def account_with_hash(self, name: str) -> tuple[Account, str] | None:
        row = await self.pool.fetchrow("SELECT * FROM gateway.accounts WHERE name = $1", name)
        return (_account(row), str(row["password_hash"])) if row else None

    async def accounts(self) -> list[Account]:
        rows = await self.pool.fetch("SELECT * FROM gateway.accounts ORDER BY created_at")
        return [_account(r) for r in rows]

    # --- web sessions ---------------------------------------------------------------------------

    async def open_session(self, account: str, ttl_s: int) -> str:
        token = new_secret()
        await self.pool.execute(
            "INSERT INTO gateway.web_sessions (token_hash, account, expires_at) "
            "VALUES ($1, $2, $3)",
            digest(token),
            account,
            datetime.now(UTC) + timedelta(seconds=ttl_s),
        )
        return token

    async def session_account(self, token: str) -> Account | None:
        row = await self.pool.fetchrow(
            "SELECT a.* FROM gateway.web_sessions s JOIN gateway.accounts a ON a.name = s.account "
            "WHERE s.token_hash = $1 AND s.expires_at > now()",
            digest(token),
        )
        return _account(row) if row else None

    async def close_session(self, token: str) -> None:
        await self.pool.execute(
            "DELETE FROM gateway.web_sessions WHERE token_hash = $1", digest(token)
        )

    async def close_all_sessions(self, account: str) -> int:
        status = await self.pool.execute(
            "DELETE FROM gateway.web_sessions WHERE account = $1 OR expires_at <= now()", account
        )
        return int(str(status).split()[-1])

    # --- sign-in attempts ----------------------------------------------------------------------

    async def take_attempt(self, account: str, client: str, limit: int, window_s: int) -> int:
        """Count one sign-in attempt of `account` from `client` before its password is checked;
        0 if it may go ahead, else the seconds until the window ends.

        One statement takes the row lock, counts and records (an attempt in flight counts as
        failed until `forget_attempts`), so no number of parallel attempts passes `limit`."""
        row = await self.pool.fetchrow(
            "INSERT INTO gateway.login_attempts AS a (account, client, window_start, attempts) "
            "VALUES ($1, $2, now(), 1) ON CONFLICT (account, client) DO UPDATE SET "
            "window_start = CASE WHEN a.window_start <= now() - $4::interval THEN now() "
            "ELSE a.window_start END, "
            "attempts = CASE WHEN a.window_start <= now() - $4::interval THEN 1 "
            "ELSE a.attempts + 1 END "
            "WHERE a.window_start <= now() - $4::interval OR a.attempts < $3 RETURNING attempts",
            account,
            client,
            limit,
            timedelta(seconds=window_s),
        )
        if row is not None:
            if row["attempts"] == 1:  # a new window: drop the ended ones (indexed, few)
                await self._drop_ended(window_s)
            return 0
        left = await self.pool.fetchval(
            "SELECT extract(epoch FROM window_start + $3::interval - now()) "
            "FROM gateway.login_attempts WHERE account = $1 AND client = $2",
            account,
            client,
            timedelta(seconds=window_s),
        )
        return max(1, int(float(left or 0)) + 1)

    async def forget_attempts(self, account: str, client: str) -> None:
        """A sign-in succeeded: its client starts afresh."""
        await self.pool.execute(
            "DELETE FROM gateway.login_attempts WHERE account = $1 AND client = $2",
            account,
            client,
        )

    async def _drop_ended(self, window_s: int) -> None:
        """The table holds the current windows only, however many names are tried."""
        await self.pool.execute(
            "DELETE FROM gateway.login_attempts WHERE window_start <= now() - $1::interval",
            timedelta(seconds=window_s),
        )

    # --- invites --------------------------------------------------------------------------------

    async def create_invite(self, by: str, ttl_s: int) -> str:
        token = new_secret()
        await self.pool.execute(
            "INSERT INTO gateway.invites (token_hash, created_by, expires_at) VALUES ($1, $2, $3)",
            digest(token),
            by,
            datetime.now(UTC) + timedelta(seconds=ttl_s),
        )
        return token

    async def invite_open(self, token: str) -> bool:
        found = await self.pool.fetchval(
            "SELECT 1 FROM gateway.invites WHERE token_hash = $1 AND used_by IS NULL "
            "AND expires_at > now()",
            digest(token),
        )
        return found is not None

    async def accept_invite(
        self, token: str, name: str, principal: str, pw_hash: str
    ) -> Account | None:
        """Use the invite and create its account in one transaction: the invite's row is
        taken with its update, so of any number of parallel accepts one creates an account;
        None if the invite is used up or expired (a refused name leaves it unused)."""
        async with self.pool.acquire() as conn, conn.transaction():
            used = await conn.fetchval(
                "UPDATE gateway.invites SET used_by = $2 WHERE token_hash = $1 "
                "AND used_by IS NULL AND expires_at > now() RETURNING created_by",
                digest(token),
                name,
            )
            if used is None:
                return None
            row = await conn.fetchrow(
                "INSERT INTO gateway.accounts (name, principal, role, password_hash) "
                "VALUES ($1, $2, 'user', $3) ON CONFLICT DO NOTHING RETURNING *",
                name,
                principal,
                pw_hash,
            )
            if row is None:  # rolls the invite back too
                raise ValidationFailed(f"the name {name!r} is taken", field="name")
            return _account(row)

    # --- imports --------------------------------------------------------------------------------

    async def record_import(
        self, principal: str, asset_id: str, kind: str, name: str, image: str | None, greeting: str
    ) -> None:
        await self.pool.execute(
            "INSERT INTO gateway.imports (principal, asset_id, kind, name, image, greeting) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (principal, asset_id) DO UPDATE SET "
            "name = excluded.name, image = excluded.image, greeting = excluded.greeting",
            principal,
            asset_id,
            kind,
            name,
            image,
            greeting,
        )

    async def imports(self, principal: str, kind: str | None = None) -> list[dict[str, Any]]:
        rows = await self.pool.fetch(
            "SELECT asset_id, kind, name, image, greeting FROM gateway.imports "
            "WHERE principal = $1 AND ($2::text IS NULL OR kind = $2) ORDER BY imported_at DESC",
            principal,
            kind,
        )
        return [dict(r) for r in rows]

    async def imported(self, principal: str, asset_id: str) -> dict[str, Any] | None:
        row = await self.pool.fetchrow(
            "SELECT asset_id, kind, name, image, greeting FROM gateway.imports "
            "WHERE principal = $1 AND asset_id = $2",
            principal,
            asset_id,
        )
        return dict(row) if row else None

"""The gateway's schema: accounts, web sessions, invites, sign-in failures and imports."""

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

    # --- sign-in failures -----------------------------------------------------------------------

    async def recent_failures(self, account: str, window_s: int) -> int:
        found = await self.pool.fetchval(
            "SELECT count(*) FROM gateway.login_failures WHERE account = $1 AND at > $2",
            account,
            datetime.now(UTC) - timedelta(seconds=window_s),
        )
        return int(found or 0)

    async def record_failure(self, account: str, window_s: int) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM gateway.login_failures WHERE at <= $1",
                datetime.now(UTC) - timedelta(seconds=window_s),
            )
            await conn.execute("INSERT INTO gateway.login_failures (account) VALUES ($1)", account)

    async def clear_failures(self, account: str) -> None:
        await self.pool.execute("DELETE FROM gateway.login_failures WHERE account = $1", account)

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

    async def use_invite(self, token: str, name: str) -> bool:
        status = await self.pool.execute(
            "UPDATE gateway.invites SET used_by = $2 WHERE token_hash = $1 AND used_by IS NULL "
            "AND expires_at > now()",
            digest(token),
            name,
        )
        return str(status).endswith(" 1")

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

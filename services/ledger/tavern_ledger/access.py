"""Who may ask the ledger what: the principal of each RPC, checked against the owner of the
session, scope or evidence it names; operator-only operations; every refusal audited.

Order of the checks: authenticate (a missing, forged or expired token is `unauthenticated`),
then find the owner of what the request names, then the ownership rule of
`tavern_runtime.principals`. Refusals are written to `ledger.audit` as `access_refused`
(outside any transaction that could roll back) before the caller gets its `forbidden`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping

from tavern_ledger import audit
from tavern_ledger.domain.extract import SessionFacts
from tavern_ledger.domain.records import AuditEntry
from tavern_ledger.scopes import owners
from tavern_ledger.toolcalls.errors import UnknownSession
from tavern_ledger.transactions import PoolSource, connection
from tavern_runtime import principals
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import Forbidden, Unauthenticated
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import Principal

log = get_logger(__name__)

REFUSED = "access_refused"
"""The audit op of a refused request."""
ANONYMOUS = "unauthenticated"
"""The actor of a refusal whose request proved no principal."""
REMEMBERED_OWNERS = 16_384
"""Sessions whose owner is kept in memory: a session's owner never changes (it comes from its
one `session/created`), so recall and the store RPCs need not ask Postgres each time."""


Creation = Callable[[str], Awaitable[SessionFacts | None]]
"""A session's facts from the `session/created` in its log (None: the log has none)."""


class Access:
    def __init__(
        self, credentials: Credentials, pool: PoolSource, creation: Creation | None = None
    ) -> None:
        self._credentials, self._pool = credentials, pool
        self._creation = creation
        self._owners: OrderedDict[str, str] = OrderedDict()

    async def principal(self, headers: Mapping[str, str] | None, op: str) -> Principal:
        """The request's principal; a request without a genuine one is audited and refused."""
        try:
            return self._credentials.principal(headers)
        except Unauthenticated as exc:
            await self._audit(op, ANONYMOUS, exc, scope_id="", target=None)
            raise

    async def session(self, principal: Principal, session_id: str, op: str) -> None:
        """Refuse unless `principal` may act on `session_id`; `UnknownSession` while the
        session's creation has not reached the ledger (the caller may catch up and ask again)."""
        if principal.kind == "operator":
            return
        owner = await self._owner_of_session(session_id)
        if owner is None and principal.user is not None:
            raise UnknownSession(f"session {session_id!r} has no binding (yet)")
        await self._check(principal, owner, op, f"session {session_id!r}", session_id, session_id)

    async def owner_of(self, session_id: str) -> str | None:
        """The session's owner (from the ledger, else its log); None: not known yet."""
        return await self._owner_of_session(session_id)

    async def _owner_of_session(self, session_id: str) -> str | None:
        known = self._owners.get(session_id)
        if known is not None:
            self._owners.move_to_end(session_id)
            return known
        async with connection(self._pool) as conn:
            owner = await owners.of_session(conn, session_id)
        if owner is None and self._creation is not None:
            # A new chat's first message often comes before ingestion stored its creation:
            # its owner is read from its log, where ingestion will read it too.
            facts = await self._creation(session_id)
            owner = facts.owner if facts is not None else None
        if owner is not None:
            self._owners[session_id] = owner
            if len(self._owners) > REMEMBERED_OWNERS:
                self._owners.popitem(last=False)
        return owner

    async def scope(self, principal: Principal, scope_id: str, op: str) -> None:
        if principal.kind == "operator":
            return
        async with connection(self._pool) as conn:
            owner = await owners.of_scope(conn, scope_id)
        await self._check(principal, owner, op, f"scope {scope_id!r}", scope_id, None)

    async def evidence(self, principal: Principal, evidence_id: str, op: str) -> None:
        """Refuse unless `principal` owns the scope the evidence lives in (missing evidence
        passes: the operation answers `not_found`)."""
        if principal.kind == "operator":
            return
        async with connection(self._pool) as conn:
            scope_id = await conn.fetchval(
                "SELECT scope_id FROM ledger.evidence WHERE id = $1", evidence_id
            )
            if scope_id is None:
                return
            owner = await owners.of_scope(conn, scope_id)
        await self._check(principal, owner, op, f"evidence {evidence_id!r}", scope_id, evidence_id)

    async def operator(self, principal: Principal, op: str, what: str) -> None:
        try:
            principals.require_operator(principal, what)
        except Forbidden as exc:
            await self._audit(op, principal.label, exc, scope_id="", target=None)
            raise

    async def curator(self, principal: Principal, op: str) -> None:
        """Refuse unless the operator or a service on its own account asks."""
        if principal.kind == "operator" or (principal.kind == "service" and principal.user is None):
            return
        exc = Forbidden(f"{op} is for the consolidator and the operator; {principal.label} asked")
        await self._audit(op, principal.label, exc, scope_id="", target=None)
        raise exc

    async def _check(
        self,
        principal: Principal,
        owner: str | None,
        op: str,
        what: str,
        scope_id: str,
        target: str | None,
    ) -> None:
        try:
            principals.authorize(principal, owner, what)
        except Forbidden as exc:
            await self._audit(op, principal.label, exc, scope_id=scope_id, target=target)
            raise

    async def _audit(
        self, op: str, actor: str, exc: Exception, *, scope_id: str, target: str | None
    ) -> None:
        code = getattr(exc, "code", "forbidden")
        entry = AuditEntry(
            op=REFUSED,
            scope_id=scope_id,
            actor=actor,
            reason=str(exc),
            target_id=target,
            payload={"rpc": op, "code": code},
        )
        async with connection(self._pool) as conn:
            await audit.append_one(conn, entry)
        log.warning(REFUSED, rpc=op, code=code, actor=actor, target=target)

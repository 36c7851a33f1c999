"""Who may ask the consolidator: its RPCs (distillation, dreaming and its review, rules,
approvals, expression, its audit trail) serve the operator and the services (the loop asks for a
session's approvals and profile for the session it runs). A user may ask only the review
operations (`ownership.USER_OPS`), and only for scopes the ledger says are theirs
(`tavern_consolidator.ownership`). Refusals are logged `access_refused`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tavern_consolidator.ownership import USER_OPS
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import Forbidden, TavernError
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import Principal

log = get_logger(__name__)


class Access:
    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def check(self, operation: str, headers: Mapping[str, str] | None) -> Principal:
        """The asker, or `Unauthenticated` / `Forbidden` (logged) if it may not ask."""
        principal: Principal | None = None
        try:
            principal = self._credentials.principal(headers)
            if principal.kind == "user" and operation not in USER_OPS:
                raise Forbidden(f"{operation} is for the operator and the services")
        except TavernError as exc:
            log.warning(
                "access_refused",
                rpc=operation,
                code=exc.code,
                principal=principal.label if principal else None,
                reason=exc.message,
            )
            raise
        return principal

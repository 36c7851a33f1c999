"""Whose input the loop takes: an input must carry a genuine principal that may act on the
session, i.e. its owner, the operator, or a service acting for the owner."""

from __future__ import annotations

from tavern_runtime.principals import Principal, may_act


def input_refusal(principal: Principal | None, auth_error: str | None, owner: str) -> str | None:
    """Why an input is refused for a session owned by `owner`, or None."""
    if principal is None:
        return f"unauthenticated: {auth_error or 'the input carries no principal'}"
    if not may_act(principal, owner):
        return f"forbidden: {principal.label} may not send input to a session of another user"
    return None


def creator(principals: list[Principal | None]) -> str | None:
    """Who a new session belongs to: the owner of the first authenticated input's principal."""
    return next((p.owner for p in principals if p is not None), None)

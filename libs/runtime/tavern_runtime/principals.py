"""Who acts: principals, their signed tokens and the ownership rule every service applies.

A token is `v1.<claims>.<mac>`: base64url of compact JSON claims `{"k": kind, "sub": name,
"exp": unix seconds[, "for": user]}` and base64url of HMAC-SHA256 over `v1.<claims>` with the
deployment's auth key. It travels in the `Tavern-Principal` header of every input and RPC.
Minting and checking are pure: the key and the clock are passed in.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tavern_events import reach
from tavern_events.rpc.base import PRINCIPAL_HEADER
from tavern_runtime.errors import Forbidden, Unauthenticated

HEADER = PRINCIPAL_HEADER
"""Contract name: the NATS header that carries the principal's token."""
VERSION = "v1"
LOCAL_OWNER = reach.LOCAL_OWNER
"""The owner of everything made before principals existed, and of what the operator makes."""
DEFAULT_TTL_S = 300
MAX_TTL_S = 86_400
"""Longest lifetime a token may claim: a leaked token stops working within a day at most."""
MIN_KEY_BYTES = 32
SKEW_S = 30
"""How far in the future a token's expiry may lie beyond MAX_TTL_S (clock skew between hosts)."""

Kind = Literal["user", "service", "operator"]
KINDS: tuple[Kind, ...] = ("user", "service", "operator")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Principal:
    """Who acts. A service acting for a user (the loop in that user's session) names the user
    in `on_behalf_of`, and is then held to that user's rights."""

    kind: Kind
    sub: str
    on_behalf_of: str | None = None

    @property
    def user(self) -> str | None:
        """The user whose rights apply: the user itself, or the one a service acts for."""
        if self.kind == "user":
            return self.sub
        return self.on_behalf_of if self.kind == "service" else None

    @property
    def owner(self) -> str:
        """Who owns what this principal creates (the operator and services create `local`)."""
        return self.user or LOCAL_OWNER

    @property
    def label(self) -> str:
        """The principal as the audit trail and the logs name it."""
        base = f"{self.kind}:{self.sub}"
        return f"{base} for user:{self.on_behalf_of}" if self.on_behalf_of else base

    def acting_for(self, user: str) -> Principal:
        return Principal(self.kind, self.sub, user)


OPERATOR = Principal("operator", "operator")


def user(name: str) -> Principal:
    return Principal("user", name)


def service(name: str) -> Principal:
    return Principal("service", name)


# --- tokens -----------------------------------------------------------------------------------


def check_key(key: bytes) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the auth key must be at least {MIN_KEY_BYTES} bytes")
    return key


def mint(principal: Principal, key: bytes, now: float, ttl_s: float = DEFAULT_TTL_S) -> str:
    """A token for `principal` that expires `ttl_s` seconds after `now`."""
    _check_principal(principal)
    if not 0 < ttl_s <= MAX_TTL_S:
        raise ValueError(f"a token lives between 1 s and {MAX_TTL_S} s")
    claims: dict[str, object] = {"k": principal.kind, "sub": principal.sub, "exp": int(now + ttl_s)}
    if principal.on_behalf_of is not None:
        claims["for"] = principal.on_behalf_of
    body = f"{VERSION}.{_b64(json.dumps(claims, separators=(',', ':'), sort_keys=True).encode())}"
    return f"{body}.{_b64(_mac(check_key(key), body))}"


def verify(token: str, key: bytes, now: float) -> Principal:
    """The principal of a genuine, unexpired token; `Unauthenticated` (saying why) else."""
    version, claims_b64, mac_b64 = _split(token)
    body = f"{version}.{claims_b64}"
    if not hmac.compare_digest(_unb64(mac_b64), _mac(check_key(key), body)):
        raise Unauthenticated("the principal token's signature does not match")
    claims = _claims(_unb64(claims_b64))
    exp = claims.get("exp")
    if not isinstance(exp, int) or isinstance(exp, bool):
        raise Unauthenticated("the principal token has no expiry")
    if exp <= now:
        raise Unauthenticated("the principal token has expired")
    if exp > now + MAX_TTL_S + SKEW_S:
        raise Unauthenticated("the principal token claims a lifetime longer than allowed")
    return _principal_of(claims)


def from_headers(headers: Mapping[str, str] | None, key: bytes, now: float) -> Principal:
    """The principal of a message's `Tavern-Principal` header; `Unauthenticated` if none."""
    token = (headers or {}).get(HEADER)
    if not token:
        raise Unauthenticated(f"the request carries no principal (header {HEADER})")
    return verify(token, key, now)


def _split(token: str) -> tuple[str, str, str]:
    if not isinstance(token, str) or len(token) > 2048:
        raise Unauthenticated("the principal token is malformed")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise Unauthenticated("the principal token is malformed")
    return parts[0], parts[1], parts[2]


def _claims(raw: bytes) -> dict[str, object]:
    try:
        claims = json.loads(raw)
    except ValueError:
        raise Unauthenticated("the principal token's claims are not JSON") from None
    if not isinstance(claims, dict):
        raise Unauthenticated("the principal token's claims are not an object")
    return claims


def _principal_of(claims: Mapping[str, object]) -> Principal:
    kind, sub, behalf = claims.get("k"), claims.get("sub"), claims.get("for")
    if kind not in KINDS or not isinstance(sub, str):
        raise Unauthenticated("the principal token names no valid principal")
    if behalf is not None and not isinstance(behalf, str):
        raise Unauthenticated("the principal token names no valid principal")
    principal = Principal(kind, sub, behalf)
    try:
        _check_principal(principal)
    except ValueError as exc:
        raise Unauthenticated(f"the principal token names no valid principal: {exc}") from None
    return principal


def _check_principal(p: Principal) -> None:
    if p.kind not in KINDS:
        raise ValueError(f"unknown principal kind {p.kind!r}")
    if not _NAME.match(p.sub):
        raise ValueError("a principal's name is 1-64 of [A-Za-z0-9_-]")
    if p.on_behalf_of is not None and (p.kind != "service" or not _NAME.match(p.on_behalf_of)):
        raise ValueError("only a service acts on behalf of a user, named like one")


def _mac(key: bytes, body: str) -> bytes:
    return hmac.new(key, body.encode("ascii"), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise Unauthenticated("the principal token is malformed") from None


# --- ownership --------------------------------------------------------------------------------


def may_act(principal: Principal, owner: str | None) -> bool:
    """The ownership rule: the operator may act on anything; a service not acting for a user
    may act (what it may call at all is bounded by its bus permissions); a user, or a service
    acting for one, only on what that user owns. An unknown owner is no one's."""
    if principal.kind == "operator":
        return True
    if principal.user is None:
        return principal.kind == "service"
    return owner is not None and owner == principal.user


def authorize(principal: Principal, owner: str | None, what: str) -> None:
    """`Forbidden` unless `principal` may act on `what`, owned by `owner`."""
    if not may_act(principal, owner):
        raise Forbidden(f"{principal.label} may not act on {what}: it is not theirs")


def require_operator(principal: Principal, what: str) -> None:
    """`Forbidden` unless the operator asks (export of every scope, import, replay...)."""
    if principal.kind != "operator":
        raise Forbidden(f"{what} needs the operator; {principal.label} asked")

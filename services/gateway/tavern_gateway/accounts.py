"""Accounts, passwords, web sessions and invites: the pure rules (no IO).

The owner (the first account of an install) acts as the user `local`, the owner of everything
the operator, the CLI and the demo create on a single-user install, so the demo conversation is
theirs. Every invited user acts as a user principal of a fresh id (`w-<random>`), never of the
name they chose.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
from dataclasses import dataclass
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from tavern_runtime import principals
from tavern_runtime.errors import ValidationFailed
from tavern_runtime.principals import Principal

Role = Literal["owner", "user"]
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = frozenset({principals.LOCAL_OWNER, "operator", "admin", "system", "service"})
MIN_PASSWORD = 10
MAX_PASSWORD = 1024
OWNER_PRINCIPAL = principals.LOCAL_OWNER

_hasher = PasswordHasher()  # argon2id, the library's (RFC 9106 low-memory) parameters


@dataclass(frozen=True)
class Account:
    name: str
    principal_name: str
    role: Role

    @property
    def principal(self) -> Principal:
        return principals.user(self.principal_name)

    @property
    def is_owner(self) -> bool:
        return self.role == "owner"


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise ValidationFailed("a user name is 1-64 letters, digits, '-' or '_'", field="name")
    if name.lower() in RESERVED:
        raise ValidationFailed(f"the name {name!r} is reserved; choose another", field="name")
    return name


def check_password(password: str) -> str:
    if not MIN_PASSWORD <= len(password or "") <= MAX_PASSWORD:
        raise ValidationFailed(
            f"a password has {MIN_PASSWORD} to {MAX_PASSWORD} characters", field="password"
        )
    return password


def hash_password(password: str) -> str:
    return _hasher.hash(check_password(password))


def verify_password(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False


DUMMY_HASH = _hasher.hash("not-a-password-of-anyone")
"""Verified against when the account does not exist: a sign-in takes as long either way."""


def new_secret() -> str:
    """A session cookie, CSRF token or invite token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def digest(secret: str) -> bytes:
    """How a secret is stored: its SHA-256 (a stolen table opens no session)."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def principal_name_for(name: str, role: Role) -> str:
    return OWNER_PRINCIPAL if role == "owner" else name


INVITEE_PREFIX = "w-"


def invitee_principal(random_hex: str) -> str:
    """The user principal of a new invited account: a fresh id, never its chosen name, so an
    invitee cannot become a bus user who already owns sessions, memory or cards."""
    return f"{INVITEE_PREFIX}{random_hex}"


def client_key(host: str) -> str:
    """Whose sign-in attempts are counted together: one IPv4 address, or one IPv6 /64 (a
    single host holds a whole /64, so counting addresses would give it 2^64 tries)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64] or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)

"""SillyTavern import on real servers: the projector, loop engines and the ledger in process."""

from __future__ import annotations

from tests.integration.loop.conftest import bus  # noqa: F401 - the `bus` fixture
from tests.integration.profiles.conftest import ledger  # noqa: F401 - the `ledger` fixture
from tests.integration.projector.conftest import idle_projector, projector  # noqa: F401

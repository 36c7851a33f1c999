"""Group chats on real servers: the loop in process (offline model) and the projector."""

from __future__ import annotations

from tests.integration.loop.conftest import bus  # noqa: F401 - the `bus` fixture
from tests.integration.profiles.conftest import ledger  # noqa: F401
from tests.integration.projector.conftest import idle_projector, projector  # noqa: F401

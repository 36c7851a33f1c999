"""The loop's `bus` fixture: a provisioned server and in-process loop engines."""

from tests.integration.loop.conftest import bus  # noqa: F401 - re-exported fixture

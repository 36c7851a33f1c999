from __future__ import annotations

from dataclasses import dataclass

import pytest
from nats.aio.client import ServerVersion

from tavern_runtime.bus import require_server_version
from tavern_runtime.errors import ConfigurationError


@dataclass
class _Client:
    connected_server_version: ServerVersion


def test_a_server_older_than_2_12_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigurationError, match=r"2\.9\.10 is too old.*2\.12"):
        require_server_version(_Client(ServerVersion("2.9.10")))  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["2.12.0", "2.15.1", "3.0.0"])
def test_a_current_server_is_accepted(version: str) -> None:
    require_server_version(_Client(ServerVersion(version)))  # type: ignore[arg-type]

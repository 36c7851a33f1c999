"""After sign-in the app goes to a path of its own site only: every way of naming another host
falls back to `/`."""

from __future__ import annotations

import pytest

from tavern_gateway.navigation import safe_next


@pytest.mark.parametrize(
    "wanted",
    [
        "/\\evil.example/x",
        "\\\\evil.example",
        "/%5Cevil.example/x",
        "/%09/evil.example",
        "/\t/evil.example",
        "/%0a/evil.example",
        "/\r\n/evil.example",
        "/%00/x",
        "//evil.example",
        "///evil.example",
        "/%2F/evil.example",
        "https://evil.example/x",
        "javascript:alert(1)",
        "evil.example",
        "",
        "/ /evil.example",
        "/\x7f/evil.example",
        "/" + "a" * 3000,
    ],
)
def test_a_next_that_could_leave_the_site_falls_back_to_home(wanted: str) -> None:
    assert safe_next(wanted) == "/"


@pytest.mark.parametrize("wanted", ["/", "/chat/s-1", "/manage?session=s-1", "/chat/s-1#end"])
def test_a_path_of_this_site_is_kept(wanted: str) -> None:
    assert safe_next(wanted) == wanted

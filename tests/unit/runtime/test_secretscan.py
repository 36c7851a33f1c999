"""Credentials out of text and URLs before they are logged or recorded."""

from __future__ import annotations

import io
import json
import sys

import pytest

from tavern_runtime.logs import configure_logging, get_logger
from tavern_runtime.secretscan import find_secrets, redact_secrets, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("nats://loop:s3cret@127.0.0.1:4222", "nats://loop:[redacted]@127.0.0.1:4222"),
        ("nats://tok3n@h:4222", "nats://[redacted]@h:4222"),
        ("nats://h:4222", "nats://h:4222"),
        (
            "postgresql://u:p%40ss@db:5432/x?sslmode=require",
            "postgresql://u:[redacted]@db:5432/x?sslmode=require",
        ),
        ("nats://a:b@n1:4222,nats://n2:4222", "nats://a:[redacted]@n1:4222,nats://n2:4222"),
    ],
)
def test_urls_keep_user_and_host_and_lose_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_a_provider_error_loses_every_key_the_patterns_know() -> None:
    key = "sk-proj-" + "a1B2c3D4" * 5
    text = f"Incorrect API key provided: {key}. Bearer {'x' * 30} too."
    redacted = redact_secrets(text)
    assert key not in redacted
    assert "[redacted:openai_key]" in redacted
    assert find_secrets(redacted) == []
    assert redact_secrets("nothing to see here") == "nothing to see here"


def test_a_key_hidden_by_full_width_letters_is_redacted_too() -> None:
    hidden = "key ｓｋ－" + "abcdefghij" * 3  # noqa: RUF001 - the disguise under test
    assert find_secrets(redact_secrets(hidden)) == []


def test_json_logs_carry_no_frame_locals_and_no_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    configure_logging("test", fmt="json")

    def connect(password: str) -> None:
        raise RuntimeError("could not connect")

    try:
        connect("hunter2-the-password")
    except RuntimeError:
        get_logger("t").exception("crashed", url="nats://u:pw-in-url-12345@h:1")
    line = json.loads(out.getvalue().strip().splitlines()[-1])
    assert line["exception"][0]["frames"], "the traceback is still there"
    assert "hunter2" not in out.getvalue()
    assert "pw-in-url-12345" not in out.getvalue()

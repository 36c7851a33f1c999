"""structlog, configured once per process: JSON in production, console on a TTY.

Tracebacks never carry frame locals (a connect call's locals hold the NATS password), and the
text of every event passes the credential patterns of `tavern_runtime.secretscan`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO, cast

import structlog
import structlog.tracebacks

from tavern_runtime.secretscan import redact_secrets

_FASTSTREAM_NOISE = ("is being executed", "callback for Task")


def _drop_noise(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    message = str(event_dict.get("event", ""))
    if any(noise in message for noise in _FASTSTREAM_NOISE):
        raise structlog.DropEvent
    return event_dict


def _flatten_extra(
    _: Any, __: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    extra = event_dict.pop("extra", None)
    if isinstance(extra, dict):
        event_dict.update({k: v for k, v in extra.items() if v})
    return event_dict


_TRACEBACKS = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)
"""structlog's `dict_tracebacks` without the locals of every frame."""


_OWN_KEYS = frozenset(
    {
        *("event", "level", "timestamp", "logger", "service", "session_id", "turn", "step"),
        *("event_id", "event_type", "stream_seq", "consumer", "op", "operation", "outcome"),
        *("code", "connection", "trace_id", "span_id"),
    }
)
"""Keys whose values are the code's own names and validated ids (STYLE.md's fixed keys, an
operation, an outcome): nothing to scrub, and the scan of every value costs ~1 us."""


def _scrub(_: Any, __: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Credentials out of the rendered text: string values, and exception texts."""
    for key, value in event_dict.items():
        if key in _OWN_KEYS:
            continue
        if isinstance(value, str):
            event_dict[key] = redact_secrets(value)
        elif key == "exception" and isinstance(value, list):
            event_dict[key] = [_scrub_frame(v) for v in value]
    return event_dict


def _scrub_frame(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub_frame(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_frame(v) for v in value]
    return redact_secrets(value) if isinstance(value, str) else value


class _CurrentStderr:
    """`sys.stderr` as it is when a line is written: loggers are cached on first use, and a
    stream swapped since (a test harness capturing one run, then closing its stream) must not
    be written to after it closed."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(service: str, level: str = "INFO", fmt: str = "auto") -> None:
    """Configure structlog and route stdlib logging through it. Idempotent."""
    json_out = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_out
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    numeric = logging.getLevelName(level.upper())
    numeric = numeric if isinstance(numeric, int) else logging.INFO
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _flatten_extra,
            _drop_noise,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            _TRACEBACKS if json_out else structlog.processors.format_exc_info,
            _scrub,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)


def get_logger(name: str | None = None) -> Any:
    return structlog.get_logger(name)

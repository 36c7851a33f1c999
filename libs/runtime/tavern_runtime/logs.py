"""structlog, configured once per process: JSON in production, console on a TTY."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

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
            structlog.processors.dict_tracebacks
            if json_out
            else structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(service=service)
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)


def get_logger(name: str | None = None) -> Any:
    return structlog.get_logger(name)

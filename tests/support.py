"""Helpers shared by tests: polling waits and real-server handles."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(
    check: Callable[[], Awaitable[T]], timeout: float = ..., interval: float = ...
) -> T: ...
@overload
async def eventually(check: Callable[[], T], timeout: float = ..., interval: float = ...) -> T: ...
async def eventually(
    check: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll `check` until it returns a truthy value without raising; return that value.

    On timeout, re-raise the last AssertionError (or fail with the last falsy value).
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    last_value: object = None
    while True:
        try:
            value = check()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            last_value = value
        except AssertionError as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            if last_error is not None:
                raise last_error
            raise AssertionError(f"condition not met within {timeout}s (last value {last_value!r})")
        await asyncio.sleep(interval)

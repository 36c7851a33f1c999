"""A loopback TCP proxy in front of NATS for one service, that can be cut and restored.

Runs on its own thread and event loop, so a busy (or briefly blocked) test loop never slows the
service's traffic. Cutting closes every connection and refuses new ones until restored: the
service sees a network partition, not a server that stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class CutProxy:
    """`127.0.0.1:<port>` -> `target`; the listening port stays the same across cuts."""

    def __init__(self, target_host: str, target_port: int, name: str = "proxy") -> None:
        self.target = (target_host, target_port)
        self.name = name
        self.port = 0
        self.cut_count = 0
        self._open = True
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()
        self._call(self._listen())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def cut(self) -> None:
        """Drop every connection now and refuse new ones."""
        self.cut_count += 1
        self._call(self._cut())

    def restore(self) -> None:
        self._open = True

    def retarget(self, host: str, port: int) -> None:
        """Point new connections at another server (a restarted one on a new port)."""
        self.target = (host, port)

    # --- on the proxy's loop ----------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(10)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _cut(self) -> None:
        self._open = False
        for writer in list(self._writers):
            _abort(writer)
        self._writers.clear()

    async def _shutdown(self) -> None:
        await self._cut()
        if self._server is not None:
            self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._open:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        if not self._open:  # cut while connecting
            _abort(writer)
            _abort(up_writer)
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._writers.discard(writer)
        self._writers.discard(up_writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close at once (RST, not a graceful FIN after pending data)."""
    transport = writer.transport
    with contextlib.suppress(Exception):
        transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    _abort(writer)

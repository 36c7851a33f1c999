"""`tavern replay <projection>`: rebuild a read model from the SESSIONS stream (or the archive),
with progress; safe while the system runs (a shadow is built, then swapped in).

    tavern replay chat                         every chat file, from the stream
    tavern replay history --session s1         one session's part
    tavern replay chat --since 2026-03-01T00:00Z   the sessions with events since then
    tavern replay chat --from-archive          from Postgres, e.g. after losing the stream
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from nats.js import JetStreamContext
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from tavern_cli import initialise
from tavern_cli.endpoints import Endpoints, nats_connection, resolve
from tavern_cli.failure import fail
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_projector.operator import ProjectorSettings, catalog, operations, options_of
from tavern_runtime import pg
from tavern_runtime.errors import TavernError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("projection", choices=catalog.NAMES, help="the read model to rebuild")
    parser.add_argument("--session", help="rebuild only this session's part")
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--from-seq", type=int, help="the sessions with entries from this stream seq"
    )
    start.add_argument("--since", type=_time, help="the sessions with entries since this ISO time")
    parser.add_argument("--from-archive", action="store_true", help="read Postgres, not NATS")
    add_server_options(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    try:
        chosen = operations.plan(
            args.projection,
            session_id=args.session,
            from_seq=args.from_seq,
            since=args.since,
            from_archive=args.from_archive,
        )
        return asyncio.run(_replay(args, chosen))
    except TavernError as exc:
        return fail("replay", exc.message)


async def _replay(args: argparse.Namespace, chosen: operations.ReplayPlan) -> int:
    console = Console()
    async with connections(args, needs_nats=not chosen.from_archive) as (pool, js):
        options = options_of(projector_settings())
        projection = catalog.build(chosen.projection, options)
        sessions = (
            await operations.affected_sessions(pool, js, projection, chosen)
            if chosen.scoped and projection.by_session
            else None
        )
        asked = list(chosen.session_ids)
        if asked and await operations.total(pool, js, projection, chosen, asked) == 0:
            where = "archive" if chosen.from_archive else "SESSIONS stream"
            raise TavernError(
                f"no session {', '.join(chosen.session_ids)} in the {where} "
                "(`tavern sessions` lists them)"
            )
        total = await operations.total(pool, js, projection, chosen, sessions or [])
        if total == 0:
            console.print(f"nothing to replay: no {chosen.projection} entries yet")
        with progress_bar(console, f"replay {chosen.projection}", total) as advance:
            report = await operations.replay(pool, js, options, chosen, advance, sessions)
    scope = f"{len(report.sessions)} session(s)" if report.sessions else "everything"
    console.print(f"[green]rebuilt {chosen.projection}[/green]: {report.entries} entries, {scope}")
    return 0


def _time(value: str) -> datetime:
    found = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return found if found.tzinfo else found.replace(tzinfo=UTC)


# --- shared by the projector's commands ----------------------------------------------------------


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS servers (default: env, then `tavern up`)")
    parser.add_argument("--database-url", help="Postgres DSN (default: env, then `tavern up`)")


def projector_settings() -> ProjectorSettings:
    """The projector's settings as the running service sees them (same data dir and env)."""
    return ProjectorSettings(data_dir=data_dir_from_env())


def endpoints_of(args: argparse.Namespace) -> Endpoints:
    return resolve(Layout(data_dir_from_env()), args.nats_url, args.database_url)


@contextlib.asynccontextmanager
async def connections(
    args: argparse.Namespace, *, needs_nats: bool = True
) -> AsyncIterator[tuple[Any, JetStreamContext | None]]:
    """A small Postgres pool and (unless not needed and unreachable) JetStream."""
    endpoints = endpoints_of(args)
    if not endpoints.database_url:
        raise endpoints.nothing_running("Postgres")
    pool = await pg.create_pool(endpoints.database_url, max_size=3)
    try:
        async with _maybe_nats(endpoints, needs_nats) as js:
            yield pool, js
    finally:
        await pool.close()


@contextlib.asynccontextmanager
async def _maybe_nats(endpoints: Endpoints, needed: bool) -> AsyncIterator[JetStreamContext | None]:
    async with contextlib.AsyncExitStack() as stack:
        try:
            nc = await stack.enter_async_context(nats_connection(endpoints))
        except TavernError:
            if needed:
                raise
            nc = None
        yield nc.jetstream(timeout=10) if nc is not None else None


class RateColumn(ProgressColumn):
    """Events per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} ev/s" if speed else "- ev/s", style="cyan")


@contextlib.contextmanager
def progress_bar(console: Console, label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar with events/s and ETA; yields `advance(n)`."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    if total == 0:  # nothing to count: no bar that reads 0/1
        yield lambda n: None
        return
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: int) -> None:
            bar.update(task, advance=n)

        yield advance
        bar.update(task, completed=max(total, bar.tasks[0].completed))

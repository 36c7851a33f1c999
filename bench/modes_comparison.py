"""Compare the context modes: the same scripted conversation in dsh-native and agent-managed.

    .venv/bin/python -m bench.modes_comparison [--window 4000] [--turns 16] [--json out.json]

Runs the real loop (dispatch, leases, profiles, tools) against a fresh embedded nats-server with
the deterministic offline model behind a chosen context window. For each mode it reports the
tokens of every request (the loop's estimate of what was sent), the tool calls, compactions, and
whether the identity facts stated in the first turn were in the requests that ask about them
(the offline model cannot judge consistency of answers; what is measured is whether the facts
were in front of the model). No projector or ledger runs: the session binds no character, so the
kernel's identity line is the no-character one in both modes, and the summaries of dsh-native's
compactions come from the offline stand-in (a real model would keep some facts in them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import AsyncGenerator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __name__ == "__main__" and not __package__:  # `python bench/modes_comparison.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from tavern_events import subjects
from tavern_events.envelope import InputCommand, SessionEvent
from tavern_events.ids import new_id
from tavern_events.input import (
    CommandInput,
    CommandInputPayload,
    MessageInput,
    MessageInputPayload,
)
from tavern_events.union import encode
from tavern_llm.base import ChatRequest, StreamItem
from tavern_llm.offline import OfflineProvider
from tavern_llm.router import ProviderRouter
from tavern_loop.dispatch import dispatch_consumer
from tavern_loop.domain.rebuild import rebuild_request
from tavern_loop.engine import EngineParts, LoopEngine
from tavern_loop.options import LoopOptions
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolSpec
from tavern_runtime import principals
from tavern_runtime.auth import Credentials, connect_signed, ensure_key_file
from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.logs import configure_logging
from tavern_runtime.provision import provision
from tavern_runtime.sessionlog import SessionLogReader
from tavern_runtime.settings import TavernSettings

FACTS = {
    "sister": "Lin",
    "home": "Cael Point",
    "trade": "cartographer",
}
OPENING = (
    "Some facts to keep: I am Ren, a cartographer from Cael Point, and my sister is Lin. "
    "You are Mira, the lighthouse keeper's apprentice."
)
QUESTIONS = (
    "What is my sister's name, and where am I from?",
    "Remind me what my trade is.",
)
MODES = ("dsh-native", "agent-managed")


@dataclass
class WindowedOffline:
    """The offline provider behind a chosen context window."""

    window: int
    inner: OfflineProvider = field(default_factory=OfflineProvider)
    name: str = "offline"
    offline: bool = True

    def context_window(self, model: str) -> int:
        return self.window

    def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        return self.inner.stream(request)


async def _weather(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(f"Forecast for {args.get('place', 'here')}: gales, then clear skies. " * 8)


WEATHER = Tool(
    ToolSpec(
        "weather",
        "The forecast for a place.",
        {
            "type": "object",
            "properties": {"place": {"type": "string"}},
            "additionalProperties": False,
        },
        parallel_safe=True,
    ),
    _weather,
)


def script(turns: int) -> list[str]:
    """The opening facts, small talk (a tool call every fourth turn), then the questions."""
    said = [OPENING]
    for turn in range(2, turns - len(QUESTIONS) + 1):
        line = f"Turn {turn}: the tide was high and the gulls loud near the harbour. " * 6
        if turn % 4 == 0:
            line += 'call weather with {"place": "the harbour"}'
        said.append(line)
    return [*said, *QUESTIONS]


@dataclass
class ModeReport:
    mode: str
    requests: int
    tokens_mean: float
    tokens_max: int
    tokens_last: int
    tool_calls: int
    compactions: int
    projections: int
    facts_in_question_requests: dict[str, str]
    kernel_stable: bool
    tokens_per_request: list[int]


def report(mode: str, events: Sequence[SessionEvent]) -> ModeReport:
    requests = [e for e in events if e.type == "agent/request"]
    tokens = [r.payload.token_estimate for r in requests]
    systems = {r.payload.params.get("system") for r in requests}
    return ModeReport(
        mode=mode,
        requests=len(requests),
        tokens_mean=round(statistics.fmean(tokens), 1) if tokens else 0.0,
        tokens_max=max(tokens, default=0),
        tokens_last=tokens[-1] if tokens else 0,
        tool_calls=sum(e.type == "tool/call" for e in events),
        compactions=sum(e.type == "context/compacted" for e in events),
        projections=sum(e.type == "request/projection" for e in events),
        facts_in_question_requests=_facts_seen(events, requests),
        kernel_stable=len(systems) == 1,
        tokens_per_request=tokens,
    )


def _facts_seen(events: Sequence[SessionEvent], requests: Sequence[Any]) -> dict[str, str]:
    """Per question: which opening facts were anywhere in what was sent to answer it
    (verbatim in the opening message, or carried by a compaction summary)."""
    seen: dict[str, str] = {}
    for number, question in enumerate(QUESTIONS, start=1):
        asked = [r for r in requests if _asked_in(events, r.turn, question)]
        sent = " ".join(
            str(m.get("content")) for r in asked for m in rebuild_request(events, r.seq)[1:]
        )
        found = [name for name, fact in FACTS.items() if fact in sent]
        seen[f"q{number}"] = f"{len(found)}/{len(FACTS)}"
    return seen


def _asked_in(events: Sequence[SessionEvent], turn: int, question: str) -> bool:
    return any(
        e.type == "user/message" and e.turn == turn and e.payload.text == question for e in events
    )


async def _publish(js: Any, command: InputCommand, kind: str) -> None:
    subject = subjects.session_input(command.session_id, kind)
    await js.publish(subject, encode(command), headers={"Nats-Msg-Id": command.input_id})


def _now() -> datetime:
    return datetime.now(UTC)


async def run_mode(js: Any, mode: str, lines: list[str]) -> list[SessionEvent]:
    session = f"modes-{mode}-{new_id()[-8:]}"
    create = CommandInputPayload(name="create", args={"context_mode": mode})
    await _publish(
        js,
        CommandInput(input_id=new_id(), session_id=session, ts=_now(), payload=create),
        "command",
    )
    await _turns_ended(js, session, 1)
    for number, text in enumerate(lines, start=2):
        message = MessageInput(
            input_id=new_id(), session_id=session, ts=_now(), payload=MessageInputPayload(text=text)
        )
        await _publish(js, message, "message")
        await _turns_ended(js, session, number)
    return await SessionLogReader(js).events(session)


async def _turns_ended(js: Any, session: str, count: int, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        events = await SessionLogReader(js).events(session)
        if sum(e.type == "turn/end" for e in events) >= count:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{session}: turn {count} did not end")


async def compare(window: int, turns: int) -> list[ModeReport]:
    root = Path(tempfile.mkdtemp(prefix="tavern-modes-"))
    server = EmbeddedNats(root / "nats")
    server.start()
    try:
        settings = TavernSettings(nats_url=server.url, data_dir=root / "data")
        ensure_key_file(settings.data_dir)  # unless TAVERN_AUTH_KEY says otherwise
        nc = await connect_signed(server.url, Credentials.of(settings), principals.OPERATOR)
        js = nc.jetstream(timeout=10)
        await provision(js, consumers=[dispatch_consumer()])
        routes = {"chat": ["offline:offline-1"], "summarise": ["offline:offline-1"]}
        router = ProviderRouter({"offline": WindowedOffline(window)}, routes)
        engine = LoopEngine(settings, EngineParts(LoopOptions(recall=False), router, [WEATHER]))
        await engine.start()
        try:
            lines = script(turns)
            return [report(mode, await run_mode(js, mode, lines)) for mode in MODES]
        finally:
            await engine.stop(grace_s=5)
            await nc.close()
    finally:
        server.stop()


def render(reports: Sequence[ModeReport], window: int) -> str:
    rows = [
        f"context window {window} tokens; same script in each mode",
        f"{'mode':<15}{'requests':>9}{'tok mean':>10}{'tok max':>9}{'tok last':>10}"
        f"{'tools':>7}{'compact':>9}{'proj':>6}  opening facts sent with each question",
    ]
    for r in reports:
        facts = ", ".join(f"{k} {v}" for k, v in r.facts_in_question_requests.items())
        rows.append(
            f"{r.mode:<15}{r.requests:>9}{r.tokens_mean:>10}{r.tokens_max:>9}{r.tokens_last:>10}"
            f"{r.tool_calls:>7}{r.compactions:>9}{r.projections:>6}  {facts}"
            f"{'' if r.kernel_stable else '  (kernel changed!)'}"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=4000, help="context window in tokens")
    parser.add_argument("--turns", type=int, default=28, help="message turns in the script")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    args = parser.parse_args(argv)
    configure_logging("bench", level="ERROR")
    reports = asyncio.run(compare(args.window, args.turns))
    print(render(reports, args.window))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

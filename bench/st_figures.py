"""SillyTavern import: `tavern st import` of a character's chats folder (10 chats, 10,000
messages in all) into session logs on a fsyncing nats-server, beside parsing the same JSONL
files raw (`json.loads` per line, nothing else) in the same run.

The figure runs the command's own importer (`tavern_cli.stimport.Importer`) with its shipped
defaults: file discovery, SillyTavern parsing, planning the log, conditional appends of 500
events per atomic batch. No projector runs (it is not part of the import)."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import nats

from bench.projector_figures import WORDS
from bench.registry import Env, Result, baseline, figure
from tavern_cli.stimport import Importer, discover
from tavern_events import streams
from tavern_runtime.provision import provision
from tavern_runtime.stchat import MONTHS

CHATS = 10
NAMES = {index: name.capitalize() for name, index in MONTHS.items()}


def send_date(ts: datetime) -> str:
    hour = ts.hour % 12 or 12
    meridiem = "pm" if ts.hour >= 12 else "am"
    return f"{NAMES[ts.month]} {ts.day}, {ts.year} {hour}:{ts.minute:02d}{meridiem}"


def chat_folder(messages: int) -> Path:
    """`chats/default_Mira/` with `CHATS` files as SillyTavern writes them (about 100-char
    messages; every reply with a swipe, every tenth line hidden)."""
    folder = Path(tempfile.mkdtemp(prefix="tavern-bench-st-")) / "default_Mira"
    folder.mkdir()
    rng = random.Random(7)
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    per_chat = max(1, messages // CHATS)
    for chat in range(CHATS):
        header = {
            "user_name": "Ren",
            "character_name": "Mira",
            "create_date": f"2026-01-{chat + 1:02d}@09h00m00s",
            "chat_metadata": {"note_prompt": "", "note_depth": 4, "chat_id_hash": chat},
        }
        lines = [_line(i, rng, start + timedelta(minutes=i)) for i in range(per_chat)]
        body = "\n".join(
            json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in [header, *lines]
        )
        (folder / f"Mira - 2026-01-{chat + 1:02d}@09h00m00s.jsonl").write_text(body)
    return folder


def _line(index: int, rng: random.Random, ts: datetime) -> dict[str, Any]:
    text = " ".join(rng.choices(WORDS, k=16))
    sent = send_date(ts)
    if index % 2 == 0:
        return {
            "name": "Ren",
            "is_user": True,
            "is_system": index % 10 == 0,
            "send_date": sent,
            "mes": text,
            "extra": {"isSmallSys": False},
        }
    other = text.upper()
    info: dict[str, Any] = {
        "send_date": sent,
        "gen_started": None,
        "gen_finished": None,
        "extra": {},
    }
    return {
        "extra": {"api": "openai", "model": "m"},
        "name": "Mira",
        "is_user": False,
        "send_date": sent,
        "mes": other,
        "swipe_id": 0,
        "swipes": [other, text],
        "swipe_info": [info, info],
    }


@baseline(
    "st_jsonl_parse",
    servers=("fsync",),
    count=10000,
    description="pure CPU: json.loads of every line of the same SillyTavern chats folder",
)
async def st_jsonl_parse(env: Env, n: int) -> Result:
    folder = chat_folder(n)
    try:
        started = time.perf_counter()
        count = 0
        for path in sorted(folder.glob("*.jsonl")):
            for raw in path.read_bytes().split(b"\n")[1:]:
                json.loads(raw)
                count += 1
        return Result(count, time.perf_counter() - started)
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)


@figure(
    "st_import",
    baseline="st_jsonl_parse",
    servers=("fsync",),
    count=10000,
    description="`tavern st import` of a 10-chat folder: parse, plan, append each chat's session "
    "log (500-event atomic batches) on a fsyncing server; messages/s",
)
async def st_import(env: Env, n: int) -> Result:
    folder = chat_folder(n)
    nc = await nats.connect(env.nats_url, name="bench")
    try:
        await provision(nc.jetstream(timeout=30), stream_specs=[streams.SESSIONS], buckets=())
        items = discover(folder)
        importer = Importer(nc, folder.parent, ZoneInfo("UTC"))
        started = time.perf_counter()
        report = await importer.run(items)
        seconds = time.perf_counter() - started
        refused = [row for row in report.rows if row.status != "imported"]
        if refused:
            raise RuntimeError(f"import did not import everything: {refused[:3]}")
        lines = sum(len(p.read_bytes().split(b"\n")) - 1 for p in folder.glob("*.jsonl"))
        return Result(lines, seconds)
    finally:
        await nc.close()
        shutil.rmtree(folder.parent, ignore_errors=True)

"""The bench's own servers: a failed figure keeps them for a look, an input whose ack does not
come is sent again and stored once."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nats
import pytest

from bench.loop_figures import BENCH_CREDENTIALS, SEND_ATTEMPTS, _message, _send
from bench.run import nats_server, workdir
from tavern_events import subjects
from tavern_events.union import encode
from tavern_runtime import principals
from tavern_runtime.provision import provision

pytestmark = pytest.mark.integration


def test_a_failed_figure_keeps_the_servers_files(capsys: pytest.CaptureFixture[str]) -> None:
    failing = pytest.raises(RuntimeError, match="the figure failed")
    with failing, workdir("broken") as root, nats_server("fsync", root):
        raise RuntimeError("the figure failed")
    found = re.search(r"kept the files of the failed bench in (\S+)", capsys.readouterr().out)
    assert found is not None
    kept = Path(found.group(1))
    try:
        assert (kept / "nats" / "nats-server.log").read_text().strip()
        assert "RuntimeError: the figure failed" in (kept / "traceback.txt").read_text()
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_a_figure_that_passes_leaves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with workdir("fine") as root, nats_server("fsync", root) as url:
        assert url.startswith("nats://")
    assert not root.exists()
    assert "kept" not in capsys.readouterr().out


async def test_an_input_sent_again_is_stored_once(capsys: pytest.CaptureFixture[str]) -> None:
    with workdir("resend") as root, nats_server("fsync", root) as url:
        nc = await nats.connect(url)
        try:
            await provision(nc.jetstream())
            message = _message("bench-resend", "hello")
            hasty = nc.jetstream(timeout=1e-6)  # every ack comes too late: each send times out
            with pytest.raises(nats.errors.TimeoutError):
                await _send(hasty, message)
            # Once more with time to answer: stored after the three (the stream takes them in
            # order), so its ack says whether they were kept, and the count below is settled.
            again = await nc.jetstream().publish(
                subjects.session_input("bench-resend", "message"),
                encode(message),
                headers=BENCH_CREDENTIALS.headers(
                    principals.OPERATOR, **{"Nats-Msg-Id": message.input_id}
                ),
            )
            assert again.duplicate, "the stream kept none of the three sends"
            info = await nc.jetstream().stream_info(
                "INPUTS", subjects_filter=subjects.input_filter("bench-resend")
            )
        finally:
            await nc.close()
    assert capsys.readouterr().out.count("sent again") == SEND_ATTEMPTS - 1
    assert info.state.messages == 1

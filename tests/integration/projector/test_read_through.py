"""Projections of several SESSIONS subjects read the whole stream through their consumer and
pass over what they do not apply: nothing missed, nothing taken for a gap."""

from __future__ import annotations

import json
from zoneinfo import ZoneInfo

import pytest

from tavern_events import subjects
from tavern_projector import catalog
from tavern_projector.framework import Target
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import scripted_turn

pytestmark = pytest.mark.integration

READ_THROUGH = ("chat", "history", "sessions")


async def test_several_filters_become_one_read_of_the_stream(projector: Projector) -> None:
    for name in READ_THROUGH:
        info = await projector.bus.js.consumer_info("SESSIONS", catalog.consumer_name(name))
        filters = info.config.filter_subjects or [info.config.filter_subject]
        assert filters == [subjects.SESSIONS_ALL], name
        options = catalog.Options(Target(), ZoneInfo("UTC"))
        projection = catalog.build(name, options)
        assert len(projection.filters) > 1, "it applies only some of them"
        assert catalog.consumer(projection).passes_over, "an older install's filter is widened"


async def test_what_a_projection_does_not_read_is_passed_over(projector: Projector) -> None:
    await projector.create_session("s1", chat_id="tale")
    for turn in range(1, 6):  # each turn: four events these projections do not read
        await scripted_turn(projector, "s1", turn, f"said {turn}", f"reply {turn}")
    await projector.caught_up(*READ_THROUGH)
    lines = projector.chat_file("Assistant/tale").read_text().splitlines()
    assert [json.loads(x)["mes"] for x in lines[1:]] == [
        text for turn in range(1, 6) for text in (f"said {turn}", f"reply {turn}")
    ]
    status = await projector.rpc("status", {})
    by_name = {p["projection"]: p for p in status["projections"]}
    assert [by_name[name]["gaps_filled"] for name in READ_THROUGH] == [0, 0, 0]
    for name in READ_THROUGH:  # every delivery acknowledged, the skipped ones too
        info = await projector.bus.js.consumer_info("SESSIONS", catalog.consumer_name(name))
        assert (info.num_pending, info.num_ack_pending) == (0, 0), name
    row = await projector.chat_row("s1")
    assert row["message_count"] == 10

"""The release gate of observations (acp.md §15): session news, one-shot paths, machine-bound
addresses, "latest version" claims and empty emotion are held; lasting facts pass (pure)."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_ledger.domain.gates import GateConfig
from tavern_ledger.domain.observations import Proposal, decide
from tavern_ledger.domain.release import gate, strip_non_prose

NOW = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("用户同意继续当前任务", "ephemeral"),
        ("用户现在正在调试登录页", "ephemeral"),
        ("The user agreed to continue the current task", "ephemeral"),
        ("The user is working on the login page right now", "ephemeral"),
        ("The build log is kept in /tmp/build-4411/out.log", "one-shot-path"),
        ("The report was saved as summary.tmp", "one-shot-path"),
        ("The user's project lives in /home/alice/projects/tavern", "env-bound"),
        ("The dev server runs at localhost:8080", "env-bound"),
        ("The API answers on http://127.0.0.1:9000/v1", "env-bound"),
        ("项目目前最新的版本是 2.3.1", "stale-version"),
        ("The latest release of the tool is v4.2", "stale-version"),
        ("终于搞定了，太爽了", "empty-emotion"),
        ("Finally! So happy", "empty-emotion"),
    ],
)
def test_what_only_held_then_and_there_is_held_for_review(text: str, cls: str) -> None:
    verdict = gate(text)
    assert (verdict.decision, verdict.cls) == ("hard_quarantine", cls)
    assert verdict.held
    assert f"release:{cls}" in verdict.flags


@pytest.mark.parametrize(
    "text",
    [
        "The user lives in Lyon and works as a nurse",
        "用户喜欢喝浓的红茶",
        "The user writes Python with strict type hints",
        "The user deploys on Fridays only after the tests pass",
        "用户的项目使用 Python 3.12",
        "The team finally chose PostgreSQL for every service they deploy",
    ],
)
def test_lasting_facts_pass(text: str) -> None:
    assert gate(text).decision == "pass"


def test_one_ephemeral_family_is_tagged_and_an_anchor_lowers_it() -> None:
    tagged = gate("The user keeps the old parser for now")
    assert (tagged.decision, tagged.flags) == ("soft_tag", ("release-tag:ephemeral",))
    assert not tagged.held
    assert gate("The user keeps the old parser for now, see commit 3f9a2c1d").decision == "pass"
    lowered = gate("用户现在正在调试 https://example.org/login")
    assert lowered.decision == "soft_tag"  # two families, but anchored by a URL


def test_code_urls_and_paths_are_cut_from_the_prose() -> None:
    body, spans = strip_non_prose("run `make test` then open https://x.org/a in /srv/app/bin")
    assert body == "run then open in"
    assert [kind for kind, _ in spans] == ["inline-code", "url", "path"]


def test_a_held_observation_is_stored_quarantined_with_its_flags() -> None:
    p = Proposal("c1", "user", "state", "work", "用户同意继续当前任务", ("e1",), NOW)
    decision = decide(p, {"e1": "user_explicit"}, GateConfig())
    assert decision.row is not None
    assert decision.row.state == "quarantined"
    assert "release:ephemeral" in decision.row.flags
    assert decision.release.as_json()["decision"] == "hard_quarantine"

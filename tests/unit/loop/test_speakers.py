"""Speaker choice: each strategy, seeded; disabled members never chosen; explicit choices."""

from __future__ import annotations

from collections import Counter

from tavern_events.group import GroupBinding, GroupMember
from tavern_loop.domain.speakers import Line, choose, resolve_member, turn_rng

NAMES = {"c_mira": "Mira", "c_cael": "Cael Voss", "c_oren": "Oren"}


def _group(**changes: object) -> GroupBinding:
    members = (
        GroupMember(character_id="c_mira", talkativeness=0.9),
        GroupMember(character_id="c_cael", talkativeness=0.1),
        GroupMember(character_id="c_oren", talkativeness=0.5),
    )
    return GroupBinding.model_validate({"group_id": "g1", "members": members, **changes})


def _run(group: GroupBinding, history: list[Line], turn: int, user: bool = True) -> tuple[str, ...]:
    return choose(group, NAMES, history, turn_rng("s_1", turn), user_input=user)


def test_the_same_session_and_turn_choose_the_same_speakers() -> None:
    history = [Line(None, "hello everyone")]
    first = [_run(_group(), history, turn) for turn in range(1, 30)]
    again = [_run(_group(), history, turn) for turn in range(1, 30)]
    assert first == again
    assert len(set(first)) > 1  # the seed differs by turn, so the rolls do


def test_natural_answers_members_named_first_in_the_order_named() -> None:
    speakers = _run(_group(), [Line(None, "Oren, and you too cael: what now?")], 1)
    assert speakers[:2] == ("c_oren", "c_cael")


def test_natural_rolls_follow_talkativeness() -> None:
    counts: Counter[str] = Counter()
    for turn in range(1, 201):
        counts.update(_run(_group(), [Line(None, "so?")], turn))
    assert counts["c_mira"] > counts["c_oren"] > counts["c_cael"] > 0


def test_natural_without_self_responses_bans_the_last_speaker_between_members() -> None:
    history = [Line(None, "hi"), Line("c_mira", "Mira here, Mira again")]
    for turn in range(1, 50):
        assert "c_mira" not in _run(_group(), history, turn, user=False)
    allowed = _group(allow_self_responses=True)
    assert any("c_mira" in _run(allowed, history, t, user=False) for t in range(1, 50))


def test_no_strategy_chooses_a_disabled_member() -> None:
    for activation in ("natural", "list", "pooled"):
        group = _group(activation=activation, disabled=("c_mira",))
        for turn in range(1, 60):
            speakers = _run(group, [Line(None, "Mira? Mira!")], turn)
            assert speakers
            assert "c_mira" not in speakers


def test_list_answers_every_enabled_member_in_order() -> None:
    group = _group(activation="list", disabled=("c_cael",))
    assert _run(group, [Line(None, "hi")], 1) == ("c_mira", "c_oren")


def test_pooled_picks_one_who_has_not_spoken_since_the_user() -> None:
    group = _group(activation="pooled")
    history = [Line(None, "hi"), Line("c_mira", "a"), Line("c_cael", "b")]
    for turn in range(1, 30):
        assert _run(group, history, turn, user=False) == ("c_oren",)
    everyone = [*history, Line("c_oren", "c")]
    assert {_run(group, everyone, t, user=False) for t in range(1, 40)} == {
        ("c_mira",),
        ("c_cael",),
    }


def test_manual_chooses_nobody() -> None:
    assert _run(_group(activation="manual"), [Line(None, "Mira?")], 1) == ()


def test_an_explicit_choice_by_name_or_id_and_its_refusals() -> None:
    group = _group(disabled=("c_oren",))
    assert resolve_member("cael voss", group, NAMES).speakers == ("c_cael",)
    assert resolve_member("c_mira", group, NAMES).speakers == ("c_mira",)
    muted = resolve_member("Oren", group, NAMES)
    assert muted.speakers == ()
    assert muted.refusal == "Oren is muted in this group"
    unknown = resolve_member("Zed", group, NAMES)
    assert unknown.refusal is not None
    assert "Mira, Cael Voss, Oren" in unknown.refusal


def test_the_model_picks_only_where_the_group_lets_it_and_never_itself() -> None:
    from tavern_loop.domain.speakers import model_pick

    assert model_pick("Oren", _group(), NAMES, "c_mira").refusal == (
        "this group does not let the model choose who speaks"
    )
    chooses = _group(model_chooses=True, disabled=["c_cael"])
    assert model_pick("oren", chooses, NAMES, "c_mira").speakers == ("c_oren",)
    assert (
        model_pick("Cael Voss", chooses, NAMES, "c_mira").refusal
        == "Cael Voss is muted in this group"
    )
    assert (
        model_pick("Mira", chooses, NAMES, "c_mira").refusal
        == "Mira cannot answer itself in this group"
    )
    selfish = _group(model_chooses=True, allow_self_responses=True)
    assert model_pick("Mira", selfish, NAMES, "c_mira").speakers == ("c_mira",)

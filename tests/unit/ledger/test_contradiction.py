"""Which earlier claims a correction ends: judged by the sentence model's similarity with the
words the two share and the old value the correction names, the clearly best only; the
attribute rules where the model sees no clear match (`domain.contradiction`)."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

from tavern_ledger.domain.contradiction import (
    Stated,
    Thresholds,
    contradicted,
    is_correction,
    named_old,
    targets,
)
from tavern_ledger.domain.segments import segments
from tavern_ledger.embedding import shared_encoder


def _stated(*texts: str) -> list[Stated]:
    return [Stated(f"e{i}", t) for i, t in enumerate(texts)]


def _ends(correction: str, *claims: str) -> list[str]:
    clauses = [s.text for s in segments(correction, True) if s.kind == "correction"]
    found, _ = contradicted(shared_encoder().embed, correction, clauses, _stated(*claims))
    return found


def test_the_clear_best_is_ended_and_a_tie_ends_nothing() -> None:
    stated = _stated("My sister lives in Porto", "My sister's name is Lena", "I like tea")
    correction = ["my sister lives in Lisbon now, not Porto"]
    assert targets(correction, stated, [[0.8, 0.3, 0.1]]) == ["e0"]
    assert targets(correction, stated, [[0.40, 0.35, 0.1]], Thresholds(floor=2.0)) == []
    tie = Thresholds(margin=0.2, close=0.0, close_other=0.0, words=0.0, named_old=0.0)
    assert targets(correction, stated, [[0.7, 0.69, 0.1]], tie) == []


def test_claims_within_a_hair_of_the_best_are_ended_with_it() -> None:
    stated = _stated("Anna and Tom met in Paris", "Tom met Anna at a workshop", "Tom sails")
    t = Thresholds(floor=0.5, margin=0.1, close=0.05, words=0.0, named_old=0.0)
    assert targets(["Anna and Tom met in Vienna"], stated, [[0.8, 0.77, 0.2]], t) == ["e0", "e1"]


def test_the_old_value_a_correction_names_counts() -> None:
    assert named_old("my sister lives in Lisbon now, not Porto.") == ["porto"]
    assert named_old("其实李明是电工，不是水管工") == ["水管工"]


def test_the_lena_correction_ends_the_residence_and_keeps_the_name() -> None:
    said = segments("Hi! My sister's name is Lena and she lives in Porto.")
    claims = [s.text for s in said if s.kind == "fact"]
    correction = "Correction: my sister lives in Lisbon now, not Porto."
    assert is_correction(correction)
    assert _ends(correction, *claims) == ["e1"]  # "My sister lives in Porto."


def test_a_correction_that_moves_the_subject_to_another_person_ends_the_old_holder() -> None:
    ended = _ends(
        "Correction: Emilia Mathen developed the app.",
        "Paulo Kinn developed the app.",
        "Paulo Kinn lives in Boston.",
        "Emilia Mathen enjoys climbing.",
    )
    assert ended == ["e0"]


def test_a_chinese_correction_ends_the_claim_it_contradicts() -> None:
    assert _ends("更正：我现在搬到上海了", "我住在北京", "我妹妹住在天津") == ["e0"]


def test_a_correction_near_nothing_ends_nothing() -> None:
    ended = _ends(
        "Correction: my dentist appointment is on Friday, not Monday",
        "I drive a blue Toyota",
        "Kevin coaches a youth team in Leeds",
    )
    assert ended == []

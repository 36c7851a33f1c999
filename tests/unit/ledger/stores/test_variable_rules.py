"""Variable rules: names, typed values and caps, and compare-and-set planning (pure)."""

from __future__ import annotations

import pytest

from tavern_ledger.domain.store_limits import StoreLimits, clamp
from tavern_ledger.domain.variables import (
    Change,
    ScopeState,
    Stored,
    check_value,
    json_type,
    plan,
    summarize,
    validate_name,
)
from tavern_ledger.toolcalls.errors import Invalid, RevisionConflict, TooLarge

LIMITS = StoreLimits()


@pytest.mark.parametrize("name", ["a", "_x", "hp", "quest.stage-2", "A" * 64, "x_1.y-z"])
def test_name_validation_accepts_restricted_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "1abc", ".x", "-x", "a b", "a/b", "a*", "名字", "A" * 65, "a\x00", "a>", "a\n"]
)
def test_name_validation_refuses_other_names(name: str) -> None:
    with pytest.raises(Invalid, match="invalid variable name"):
        validate_name(name)


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "null"),
        (True, "boolean"),
        (3, "integer"),
        (2.5, "number"),
        ("s", "string"),
        ([1], "array"),
        ({"a": 1}, "object"),
    ],
)
def test_json_type_names_every_json_type(value: object, kind: str) -> None:
    assert json_type(value) == kind


def test_value_at_the_cap_is_accepted_and_one_byte_more_is_refused() -> None:
    fits = "x" * (LIMITS.max_value_bytes - 2)  # the quotes make it exactly the cap
    assert check_value("v", fits, LIMITS) == 1 + LIMITS.max_value_bytes
    with pytest.raises(TooLarge, match="limit is 32768"):
        check_value("v", fits + "x", LIMITS)


def test_value_size_counts_utf8_bytes() -> None:
    with pytest.raises(TooLarge):
        check_value("v", "é" * (LIMITS.max_value_bytes // 2), LIMITS)


def test_value_refuses_nul_and_deep_nesting() -> None:
    with pytest.raises(Invalid, match="NUL"):
        check_value("v", {"k": ["a\x00"]}, LIMITS)
    deep: object = 1
    for _ in range(LIMITS.max_value_depth + 1):
        deep = [deep]
    with pytest.raises(Invalid, match="nest"):
        check_value("v", deep, LIMITS)


def test_summary_shows_shape_of_containers_and_cuts_scalars() -> None:
    assert summarize({"a": 1, "b": 2}, 80) == "{a, b} (2 keys)"
    assert summarize([1, 2, 3], 80) == "[3 items]"
    assert summarize("x" * 100, 10) == '"xxxxxxxx…'
    assert summarize(42, 80) == "42"


def test_create_needs_expected_revision_zero() -> None:
    result = plan(ScopeState(), {}, [Change("hp", 10, expected=0)], LIMITS)
    assert (result.revision, [w.name for w in result.writes]) == (1, ["hp"])
    assert result.total_bytes == len("hp") + len("10")


def test_set_with_stale_revision_is_a_conflict_naming_the_current_one() -> None:
    stored = {"hp": Stored("hp", 4, 4)}
    with pytest.raises(RevisionConflict) as caught:
        plan(ScopeState(4, 4), stored, [Change("hp", 9, expected=3)], LIMITS)
    assert caught.value.details["current_revision"] == 4
    assert caught.value.code == "conflict"


def test_create_of_an_existing_variable_is_a_conflict() -> None:
    stored = {"hp": Stored("hp", 2, 4)}
    with pytest.raises(RevisionConflict):
        plan(ScopeState(2, 4), stored, [Change("hp", 1, expected=0)], LIMITS)


def test_update_with_current_revision_takes_the_next_scope_revision() -> None:
    stored = {"hp": Stored("hp", 2, 4)}
    result = plan(ScopeState(7, 4), stored, [Change("hp", 100, expected=2)], LIMITS)
    assert result.revision == 8
    assert result.writes[0].previous_revision == 2
    assert result.total_bytes == 2 + 3


def test_patch_checks_the_scope_revision_once_for_all_changes() -> None:
    changes = [Change("a", 1), Change("b", 2)]
    with pytest.raises(RevisionConflict) as caught:
        plan(ScopeState(5, 0), {}, changes, LIMITS, expected_scope_revision=4)
    assert caught.value.details["current_revision"] == 5
    result = plan(ScopeState(5, 0), {}, changes, LIMITS, expected_scope_revision=5)
    assert (result.revision, len(result.writes)) == (6, 2)


def test_patch_is_all_or_nothing_when_one_change_conflicts() -> None:
    stored = {"b": Stored("b", 3, 2)}
    changes = [Change("a", 1), Change("b", 2, expected=1)]
    with pytest.raises(RevisionConflict):
        plan(ScopeState(3, 2), stored, changes, LIMITS, expected_scope_revision=3)


def test_patch_refuses_the_same_name_twice() -> None:
    with pytest.raises(Invalid, match="only once"):
        plan(ScopeState(), {}, [Change("a", 1), Change("a", 2)], LIMITS)


def test_delete_frees_its_bytes_and_deleting_a_missing_variable_changes_nothing() -> None:
    stored = {"a": Stored("a", 1, 10)}
    removed = plan(ScopeState(1, 10), stored, [Change("a", delete=True)], LIMITS)
    assert (removed.revision, removed.total_bytes, removed.changed) == (2, 0, True)
    missing = plan(ScopeState(1, 10), stored, [Change("zz", delete=True)], LIMITS)
    assert (missing.revision, missing.changed) == (1, False)


def test_scope_cap_counts_every_variable_of_the_scope() -> None:
    limits = StoreLimits(max_value_bytes=100, max_scope_bytes=250)
    state = ScopeState(1, 200)
    plan(state, {}, [Change("a", "x" * 40)], limits)  # 200 + 1 + 42 fits
    with pytest.raises(TooLarge, match="scope would hold"):
        plan(state, {}, [Change("a", "x" * 60)], limits)


def test_replacing_a_big_value_with_a_small_one_fits_a_full_scope() -> None:
    limits = StoreLimits(max_value_bytes=100, max_scope_bytes=100)
    stored = {"a": Stored("a", 1, 100)}
    assert plan(ScopeState(1, 100), stored, [Change("a", 1)], limits).total_bytes == 2


@pytest.mark.parametrize(
    ("asked", "expected"), [(None, 10), (0, 1), (-5, 1), (7, 7), (50, 50), (51, 50), (10**6, 50)]
)
def test_limits_are_clamped_to_their_hard_cap(asked: int | None, expected: int) -> None:
    assert clamp(asked, default=10, cap=50) == expected

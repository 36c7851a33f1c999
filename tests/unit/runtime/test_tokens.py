"""The one token estimate: CJK-aware, and calibrated per model from reported usage."""

from __future__ import annotations

from tavern_runtime.tokens import Calibration, estimate_tokens


def test_english_is_about_four_characters_a_token() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd" * 25) == 25


def test_chinese_japanese_and_korean_count_a_token_a_character() -> None:
    chinese = "我的船叫鹦鹉螺号\uff0c是一艘蓝色的帆船。"
    assert estimate_tokens(chinese) == len(chinese)  # len/4 would say a quarter of that
    assert estimate_tokens("ひらがなカタカナ") == 8
    assert estimate_tokens("안녕하세요") == 5
    assert estimate_tokens("Ada 的船") == 3  # 2 CJK + ceil(4 x 0.25)


def test_the_rate_for_other_characters_is_the_callers() -> None:
    assert estimate_tokens("abcdefghij", other_rate=0.3) == 3


def test_calibration_learns_each_model_apart_and_starts_neutral() -> None:
    calibration = Calibration()
    assert calibration.calibrated("gpt", 100) == 100
    for _ in range(30):
        calibration.observe("gpt", 100, 150)
        calibration.observe("qwen", 100, 80)
    assert 145 <= calibration.calibrated("gpt", 100) <= 150
    assert 80 <= calibration.calibrated("qwen", 100) <= 82
    assert calibration.seen == {"gpt": 30, "qwen": 30}


def test_one_odd_report_is_clamped_and_empty_ones_are_ignored() -> None:
    calibration = Calibration()
    calibration.observe("m", 100, 0)
    calibration.observe("m", 0, 100)
    assert calibration.ratios == {}
    calibration.observe("m", 10, 100_000)
    assert calibration.ratio("m") == 4.0

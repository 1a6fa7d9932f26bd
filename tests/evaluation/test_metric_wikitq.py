"""WikiTQ denotation accuracy: hand-checked cases of the official evaluator's rules, and the
points where its Python 2 behaviour is kept."""

from __future__ import annotations

import pytest

from dagwright.evaluation.metrics import wikitq


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("Café [1]", "cafe"),  # diacritics, citation
        ("\u201cHello\u201d", "hello"),  # smart quotes, then outer quotes removed
        ("Hello\u2020", "hello"),  # citation mark
        ("Paris (France)", "paris"),  # trailing details in parentheses
        ("(a)", "(a)"),  # not after a space: kept
        ("U.S.", "u.s"),  # final period
        ("  A   b  ", "a b"),
        ("1\u20132", "1-2"),  # en dash
        ("[1]", ""),  # a citation alone goes
        ("[\u0661]", "[\u0661]"),  # Python 2's \d was ASCII: an Arabic-Indic digit stays
        ("x [note] [2]", "x"),
    ],
)
def test_normalize(raw: str, normalised: str) -> None:
    assert wikitq.normalize(raw) == normalised


def _correct(target: list[str], predicted: list[str], canon: list[str] | None = None) -> bool:
    return wikitq.is_correct(wikitq.to_value_list(target, canon), predicted)


def test_numbers_match_within_1e_6_and_by_string() -> None:
    assert _correct(["4"], ["4.0"])
    assert _correct(["4"], ["4.0000001"])
    assert not _correct(["4"], ["4.01"])
    # "1,000" is not a number to float(): a string, unless the canon says 1000.
    assert not _correct(["1,000"], ["1000"])
    assert _correct(["1,000"], ["1000"], canon=["1000.0"])
    assert _correct(["1,000"], ["1,000"])


def test_dates() -> None:
    assert not _correct(["1990-01-12"], ["xx-01-12"])  # all fields must agree
    assert _correct(["1990-01-12"], ["1990-01-12"])
    assert _correct(["1990-xx-xx"], ["1990"])  # a year alone is a number
    assert _correct(["January 12, 1990"], ["1990-01-12"], canon=["1990-01-12"])


def test_size_and_items() -> None:
    assert _correct(["a", "b"], ["b", "a"])  # order is free
    assert not _correct(["a", "b"], ["a", "a"])  # duplicates collapse: one value for two
    assert not _correct(["a"], ["a", "b"])
    assert not _correct(["a"], [])


def test_python2_int_and_float_parsing_kept() -> None:
    # Python 3 reads 1_000 as 1000; the official evaluator (Python 2) did not.
    assert not _correct(["1000"], ["1_000"])
    # unicode(0.1 + 0.2) was "0.3" in Python 2 (12 significant digits).
    assert wikitq.NumberValue(0.1 + 0.2).normalized == "0.3"
    assert wikitq.NumberValue(2.5).normalized == "2.5"


def test_unknown_day_prints_as_minus_one_as_in_the_official_code() -> None:
    assert wikitq.DateValue(1990, 1, -1).normalized == "1990-1--1"


def test_tsv_escapes_and_lines() -> None:
    assert wikitq.tsv_unescape_list(r"a\pb|c\nd|e\\f") == ["a|b", "c\nd", "e\\f"]
    # codecs' readline broke lines at every Unicode line boundary.
    assert wikitq.official_lines("x\u2028y\nz\n") == ["x\u2028", "y", "z"]


def test_target_canon_decides_the_type() -> None:
    row = {"targetValue": "two", "targetCanon": "2"}
    assert wikitq.is_correct(wikitq.targets_from_row(row), ["2"])
    assert not wikitq.is_correct(wikitq.targets_from_row({"targetValue": "two"}), ["2"])

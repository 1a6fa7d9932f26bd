"""The one pagination policy (store/paging.py), as code (not the API) meets it."""

from __future__ import annotations

import pytest

from dagwright.errors import InputError
from dagwright.store.paging import MAX_LIMIT, MAX_OFFSET, Page, Window, window


def test_a_good_window_is_kept() -> None:
    assert window(0, 1) == Window(0, 1)
    assert window(MAX_OFFSET, MAX_LIMIT) == Window(MAX_OFFSET, MAX_LIMIT)


def test_a_limit_past_the_maximum_is_clamped() -> None:
    assert window(5, MAX_LIMIT + 1) == Window(5, MAX_LIMIT)


@pytest.mark.parametrize(
    ("offset", "limit", "field"),
    [(-1, 10, "offset"), (MAX_OFFSET + 1, 10, "offset"), (0, 0, "limit"), (0, -3, "limit")],
)
def test_a_bad_window_names_its_field(offset: int, limit: int, field: str) -> None:
    with pytest.raises(InputError) as refused:
        window(offset, limit)
    assert refused.value.message.startswith(f"{field}: ")


def test_map_keeps_the_window_and_total() -> None:
    page = Page([1, 2], total=7, offset=2, limit=2)
    assert page.map(str) == Page(["1", "2"], 7, 2, 2)

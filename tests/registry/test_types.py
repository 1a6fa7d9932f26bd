"""Port types: static compatibility and run-time checks."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from dagwright.registry import Compat, checker_for, compatibility, type_name


class Animal(BaseModel):
    name: str


class Dog(Animal):
    pass


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        (str, str, Compat.YES),
        (int, float, Compat.YES),
        (float, int, Compat.NO),
        (bool, int, Compat.NO),
        (str, Any, Compat.YES),
        (Any, str, Compat.CHECK),
        (list[str], list[Any], Compat.YES),
        (list[Any], list[str], Compat.CHECK),
        (list[str], list[int], Compat.NO),
        (list[str], str, Compat.NO),
        (dict[str, int], dict[str, float], Compat.YES),
        (str | None, str, Compat.CHECK),
        (str, str | None, Compat.YES),
        (None, str | None, Compat.YES),
        (int | str, float, Compat.CHECK),
        (Literal["a", "b"], str, Compat.YES),
        (str, Literal["a"], Compat.CHECK),
        (int, Literal["a"], Compat.NO),
        (Dog, Animal, Compat.YES),
        (Animal, Dog, Compat.NO),
    ],
)
def test_compatibility(source: Any, target: Any, expected: Compat) -> None:
    assert compatibility(source, target) is expected


def test_type_names() -> None:
    assert type_name(dict[str, list[int]]) == "dict[str, list[int]]"
    assert type_name(str | None) == "str | None"
    assert type_name(list) == "list[Any]"
    assert type_name(Literal["x"]) == "Literal['x']"


@pytest.mark.parametrize(
    ("tp", "good", "bad", "message"),
    [
        (int, 3, True, "expected int, got bool True"),
        (float, 3, "3", "expected float, got str '3'"),
        (str, "x", None, "expected str, got NoneType None"),
        (list[int], [1, 2], [1, "2"], "item 1: expected int, got str '2'"),
        (dict[str, int], {"a": 1}, {"a": 1.5}, "key 'a': expected int, got float 1.5"),
        (str | None, None, 1, "expected str | None, got int 1"),
        (Literal["a", 1], 1, True, "expected Literal['a', 1], got bool True"),
        (Animal, Dog(name="rex"), {"name": "rex"}, "expected Animal, got dict"),
    ],
)
def test_checkers(tp: Any, good: Any, bad: Any, message: str) -> None:
    check = checker_for(tp)
    assert check is not None
    assert check(good) is None
    problem = check(bad)
    assert problem is not None
    assert problem.startswith(message)


def test_any_needs_no_check() -> None:
    assert checker_for(Any) is None
    assert checker_for(int | Any) is None

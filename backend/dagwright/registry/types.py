"""Port types: which annotations a port may have, their names, JSON Schema, static
compatibility (checked when a flow is saved) and run-time checks on real values.

Port types are plain Python annotations: Any, str, int, float, bool, None, list[T],
dict[str, T], unions (T | None), Literal[...] and pydantic models. Anything else is refused
when the block is declared, so the editor can always draw and colour a port.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal, Union

from pydantic import BaseModel, TypeAdapter

# A checker returns None when the value fits, else a short description of why not.
Checker = Callable[[Any], str | None]

_PRIMITIVES: tuple[type, ...] = (str, int, float, bool, type(None))


class Compat(enum.Enum):
    """Whether a value of one port type may flow into a port of another."""

    YES = "yes"  # always fits
    CHECK = "check"  # may fit: checked on the real value at run time (e.g. Any -> str)
    NO = "no"  # never fits: a type mismatch reported when the flow is saved


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is Union or origin is types.UnionType


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def unsupported_reason(tp: Any) -> str | None:
    """Why `tp` cannot be a port type, or None when it can."""
    if tp is Any or tp in _PRIMITIVES or tp is None or _is_model(tp):
        return None
    if tp is list or tp is dict:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return unsupported_reason(args[0])
    if origin is list:
        return unsupported_reason(args[0])
    if origin is dict:
        if args[0] is not str:
            return f"dict keys must be str (JSON objects), not {type_name(args[0])}"
        return unsupported_reason(args[1])
    if _is_union(tp):
        for arg in args:
            reason = unsupported_reason(arg)
            if reason:
                return reason
        return None
    if origin is Literal:
        if all(isinstance(a, str | int | bool) for a in args):
            return None
        return "Literal values must be str, int or bool"
    return (
        f"{tp!r} is not a supported port type (use Any, str, int, float, bool, None, "
        "list[T], dict[str, T], unions, Literal or a pydantic model)"
    )


def strip_annotated(tp: Any) -> Any:
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0]
    return tp


def type_name(tp: Any) -> str:
    """A stable, readable name: the editor shows it and colours ports by it."""
    tp = strip_annotated(tp)
    if tp is Any:
        return "Any"
    if tp is None or tp is type(None):
        return "None"
    if tp is list:
        return "list[Any]"
    if tp is dict:
        return "dict[str, Any]"
    if _is_union(tp):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "Literal[" + ", ".join(repr(a) for a in typing.get_args(tp)) + "]"
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]"
    return str(getattr(tp, "__name__", repr(tp)))


@lru_cache(maxsize=512)
def json_schema(tp: Any) -> dict[str, Any]:
    return TypeAdapter(tp).json_schema()


def _args_or_any(tp: Any, count: int) -> tuple[Any, ...]:
    args = typing.get_args(tp)
    return args if args else (Any,) * count


def _combine(results: list[Compat]) -> Compat:
    """All members of a source union must fit; some fitting means a run-time check."""
    if all(r is Compat.YES for r in results):
        return Compat.YES
    if all(r is Compat.NO for r in results):
        return Compat.NO
    return Compat.CHECK


def _best(results: list[Compat]) -> Compat:
    """A value fits a target union if it fits any member."""
    if Compat.YES in results:
        return Compat.YES
    if Compat.CHECK in results:
        return Compat.CHECK
    return Compat.NO


def _base_of_literal(tp: Any) -> Any:
    values = typing.get_args(tp)
    kinds = {type(v) for v in values}
    return kinds.pop() if len(kinds) == 1 else Any


@lru_cache(maxsize=4096)
def compatibility(source: Any, target: Any) -> Compat:  # noqa: C901, PLR0912
    """May a value declared as `source` flow into a port declared as `target`?"""
    source, target = strip_annotated(source), strip_annotated(target)
    if target is Any:
        return Compat.YES
    if source is Any:
        return Compat.CHECK
    if source is None:
        source = type(None)
    if target is None:
        target = type(None)
    if _is_union(source):
        return _combine([compatibility(s, target) for s in typing.get_args(source)])
    if _is_union(target):
        return _best([compatibility(source, t) for t in typing.get_args(target)])
    s_origin, t_origin = typing.get_origin(source), typing.get_origin(target)
    if s_origin is Literal and t_origin is Literal:
        s_values, t_values = set(typing.get_args(source)), set(typing.get_args(target))
        if s_values <= t_values:
            return Compat.YES
        return Compat.CHECK if s_values & t_values else Compat.NO
    if s_origin is Literal:
        base = _base_of_literal(source)
        return Compat.CHECK if base is Any else compatibility(base, target)
    if t_origin is Literal:
        base = _base_of_literal(target)
        return Compat.NO if compatibility(source, base) is Compat.NO else Compat.CHECK
    if source is list or s_origin is list:
        if not (target is list or t_origin is list):
            return Compat.NO
        return compatibility(_args_or_any(source, 1)[0], _args_or_any(target, 1)[0])
    if source is dict or s_origin is dict:
        if not (target is dict or t_origin is dict):
            return Compat.NO
        return compatibility(_args_or_any(source, 2)[1], _args_or_any(target, 2)[1])
    if target is list or t_origin is list or target is dict or t_origin is dict:
        return Compat.NO
    if source is target:
        return Compat.YES
    if source is int and target is float:
        return Compat.YES
    if _is_model(source) and _is_model(target) and issubclass(source, target):
        return Compat.YES
    return Compat.NO


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_value(value: Any) -> str:
    return f"{type(value).__name__} {_short(value)}"


@lru_cache(maxsize=512)
def checker_for(tp: Any) -> Checker | None:  # noqa: C901
    """A fast run-time check of a value against a port type; None when anything fits."""
    tp = strip_annotated(tp)
    if tp is Any:
        return None
    name = type_name(tp)

    def fail(value: Any) -> str:
        return f"expected {name}, got {describe_value(value)}"

    if tp is None or tp is type(None):
        return lambda v: None if v is None else fail(v)
    if tp is bool:
        return lambda v: None if v is True or v is False else fail(v)
    if tp is int:
        return lambda v: None if isinstance(v, int) and not isinstance(v, bool) else fail(v)
    if tp is float:
        return lambda v: None if isinstance(v, float | int) and not isinstance(v, bool) else fail(v)
    if tp is str:
        return lambda v: None if isinstance(v, str) else fail(v)
    if _is_model(tp):
        return lambda v: None if isinstance(v, tp) else fail(v)
    origin = typing.get_origin(tp)
    if origin is Literal:
        allowed = typing.get_args(tp)
        return lambda v: None if any(v == a and type(v) is type(a) for a in allowed) else fail(v)
    if _is_union(tp):
        members = [checker_for(a) for a in typing.get_args(tp)]
        if any(m is None for m in members):
            return None
        checks = [m for m in members if m is not None]
        return lambda v: None if any(c(v) is None for c in checks) else fail(v)
    if tp is list or origin is list:
        item = checker_for(_args_or_any(tp, 1)[0])

        def check_list(v: Any) -> str | None:
            if not isinstance(v, list):
                return fail(v)
            if item is not None:
                for index, element in enumerate(v):
                    problem = item(element)
                    if problem:
                        return f"item {index}: {problem}"
            return None

        return check_list
    if tp is dict or origin is dict:
        value_check = checker_for(_args_or_any(tp, 2)[1])

        def check_dict(v: Any) -> str | None:
            if not isinstance(v, dict):
                return fail(v)
            for key, element in v.items():
                if not isinstance(key, str):
                    return f"key {key!r} is not a str"
                if value_check is not None:
                    problem = value_check(element)
                    if problem:
                        return f"key {key!r}: {problem}"
            return None

        return check_dict
    raise TypeError(f"no checker for {tp!r}")

"""The official demonstrations, and prompts made of the first n of them."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any


@functools.cache
def _all() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(
        (Path(__file__).with_name("demos.json")).read_text(encoding="utf-8")
    )
    return data


def count(name: str) -> int:
    """How many demonstrations the official prompt `name` has."""
    return len(_all()[name]["demos"])


def text(name: str, n_demos: int | None = None) -> str:
    """The official prompt `name` with its first `n_demos` demonstrations (None: all, which
    is the official text exactly)."""
    entry = _all()[name]
    demos = entry["demos"] if n_demos is None else entry["demos"][:n_demos]
    parts = ([entry["intro"]] if entry["intro"] else []) + demos
    if entry["outro"]:
        parts.append(entry["outro"])
    return "\n\n".join(parts)

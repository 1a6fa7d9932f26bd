"""Charts as values: a chart is a Vega-Lite spec (a JSON object whose `$schema` names
Vega-Lite) with its data inline, so any block can return one, a run stores it like any other
output, the editor draws it (frontend/src/charts/) and the API renders it to SVG or PNG for
published callers (vl-convert, which bundles its own Vega engine: nothing is downloaded).

Rendering a spec that a stranger sent is hostile input: `policy` checks it in Python first
(inline data only, bounded data, views, size and depth), then `renderer` renders it in a
fresh child process under the sandbox's bubblewrap isolation, with memory and time limits and
a small pool (docs/security/charts.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from dagwright.errors import DagwrightError

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
Mark = Literal["bar", "line", "point", "area", "arc"]
MARKS: tuple[str, ...] = ("bar", "line", "point", "area", "arc")
MAX_POINTS = 5000  # a chart carries its data; more rows belong in a table


class ChartError(DagwrightError):
    """A chart cannot be made or rendered (a field that is not in the data, an unknown
    format, no renderer installed, a spec the policy refuses: `chart_invalid`), or its
    render ran past its time (`chart_timeout`) or memory (`chart_memory`)."""

    code = "chart_invalid"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


def is_chart(value: Any) -> bool:
    return isinstance(value, dict) and "vega-lite" in str(value.get("$schema", ""))


def _type(values: Sequence[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "quantitative"
    if present and all(isinstance(v, str) and _looks_like_date(v) for v in present):
        return "temporal"
    return "nominal"


def _looks_like_date(text: str) -> bool:
    return len(text) >= 10 and text[4] == "-" and text[7] == "-" and text[:4].isdigit()


def _clean(value: Any) -> Any:
    # JSON has no NaN or infinity; Vega treats null as missing.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def chart(
    records: Sequence[Mapping[str, Any]],
    mark: str,
    x: str,
    y: str,
    color: str | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """A Vega-Lite spec of `records`: `x` against `y` (for an `arc`, `x` is the category and
    `y` the angle), coloured by `color`. Field types are read from the values."""
    if mark not in MARKS:
        raise ChartError(f"mark {mark!r} is not one of {', '.join(MARKS)}")
    if len(records) > MAX_POINTS:
        raise ChartError(f"{len(records)} rows is more than a chart carries ({MAX_POINTS})")
    columns = {key for row in records for key in row}
    for role, name in (("x", x), ("y", y), ("color", color)):
        if name is not None and records and name not in columns:
            raise ChartError(
                f"{role} field {name!r} is not a column ({', '.join(sorted(columns))})"
            )
    values = [{k: _clean(v) for k, v in row.items()} for row in records]

    def field(name: str) -> dict[str, Any]:
        return {"field": name, "type": _type([row.get(name) for row in values])}

    if mark == "arc":
        encoding: dict[str, Any] = {"theta": field(y), "color": field(x)}
    else:
        encoding = {"x": field(x), "y": field(y)}
        if color is not None:
            encoding["color"] = field(color)
    spec: dict[str, Any] = {
        "$schema": SCHEMA,
        "data": {"values": values},
        "mark": {"type": mark, "tooltip": True},
        "encoding": encoding,
    }
    if title:
        spec["title"] = title
    return spec

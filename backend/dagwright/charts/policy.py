"""What a chart spec may hold before anything renders it: inline data only, bounded data,
views, size and depth. Checked in Python, in the request, in time linear in the spec's size;
a refusal is a `ChartError` (`chart_invalid`, HTTP 400) naming the JSON path of the field.

The policy stops what can be seen in the spec. What cannot (a transform that multiplies
rows, a facet over many distinct values, an expression that loops) is bounded by the render's
child process: its memory and wall-clock limits (`renderer`). See docs/security/charts.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagwright.charts import ChartError

# The spec's JSON text: a chart carries its data, and MAX_ROWS rows of a few fields fit.
MAX_SPEC_BYTES = 2 * 1024 * 1024
# Nesting of objects and lists: real specs nest a dozen levels (concat > layer > encoding >
# condition > ...); the walk below recurses, so this also bounds Python's stack.
MAX_DEPTH = 40
# Data rows over all inline values, named datasets and generators (sequence lengths, impute
# key values). 20,000 points render in ~0.6 s; 1,000,000 ran V8 out of its heap and, before
# rendering moved out of process, killed the server (issue 29).
MAX_ROWS = 50_000
# Views over concat/hconcat/vconcat/layer members and repeats, recursively. A dashboard has a
# few dozen; 2,000 concatenated views froze the server for 40 s (issue 29).
MAX_VIEWS = 100
# Numbers that size work per view: bins, density steps, axis ticks. Defaults are 10 to 200.
MAX_STEPS = 1_000
# Width and height in pixels (times the PNG scale, at most 4): bounds the image's memory.
MAX_DIMENSION = 5_000
# A graticule's lines, in degrees between them: 1 degree is 360 x 180 lines at most.
MIN_GRATICULE_STEP = 1.0

# Keys whose value makes Vega load something: a dataset, lookup or image `url`, or an
# image-like `loader`/`baseURL` option. Refused wherever they appear (config and usermeta
# included): the renderer has no network, and a refusal here is a clear 400 rather than an
# empty chart.
_LOADING_KEYS = frozenset({"url", "loader", "baseURL"})
_CONCAT_KEYS = ("concat", "hconcat", "vconcat", "layer")
_STEP_KEYS = frozenset({"maxbins", "steps", "tickCount", "labelLimit"})
_SIZE_KEYS = frozenset({"width", "height"})
# Generators of rows from start/stop/step: data.sequence, and impute's key values.
_GENERATED_KEYS = frozenset({"sequence", "keyvals"})
_LINK_SCHEMES = ("http://", "https://")


@dataclass(frozen=True, slots=True)
class SpecLimits:
    """The policy's caps; only `max_rows` is a setting (DAGWRIGHT_CHARTS_MAX_ROWS)."""

    max_rows: int = MAX_ROWS
    max_views: int = MAX_VIEWS
    max_spec_bytes: int = MAX_SPEC_BYTES
    max_depth: int = MAX_DEPTH


def check_spec(spec: Mapping[str, Any], limits: SpecLimits = SpecLimits()) -> None:
    """Raises ChartError (`chart_invalid`) naming the first field the policy refuses."""
    if "vega-lite" not in str(spec.get("$schema", "")):
        raise ChartError("not a chart: a Vega-Lite spec needs its $schema ($.$schema)")
    try:
        size = len(json.dumps(spec, separators=(",", ":"), allow_nan=False).encode())
    except (ValueError, TypeError, RecursionError) as exc:
        raise ChartError(f"the chart is not plain JSON: {exc}") from None
    if size > limits.max_spec_bytes:
        raise ChartError(f"the chart's spec is {size:,} bytes, more than {limits.max_spec_bytes:,}")
    walk = _Walk(limits)
    walk.value(spec, "$", 0)
    views = _views(spec, "$")
    if views > limits.max_views:
        raise ChartError(
            f"the chart has {views:,} views (concat, layer and repeat members), more than "
            f"{limits.max_views}"
        )
    if walk.rows > limits.max_rows:
        raise ChartError(
            f"the chart's data has {walk.rows:,} rows (inline values, datasets and "
            f"generators), more than {limits.max_rows:,}; {walk.largest} is the largest"
        )


def _refuse(path: str, why: str) -> ChartError:
    return ChartError(f"{path}: {why}")


class _Walk:
    """One pass over every value: loading keys, links, generators, data sizes, steps."""

    def __init__(self, limits: SpecLimits) -> None:
        self.limits = limits
        self.rows = 0
        self.largest = ""
        self._largest_rows = -1

    def _count(self, rows: int, path: str) -> None:
        self.rows += rows
        if rows > self._largest_rows:
            self._largest_rows, self.largest = rows, f"{path} ({rows:,} rows)"

    def value(self, value: Any, path: str, depth: int) -> None:
        if depth > self.limits.max_depth:
            raise _refuse(path, f"nested deeper than {self.limits.max_depth} levels")
        if isinstance(value, dict):
            self._object(value, path, depth)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.value(item, f"{path}[{index}]", depth + 1)

    def _object(self, node: dict[str, Any], path: str, depth: int) -> None:
        for key, item in node.items():
            here = f"{path}.{key}"
            self._check(key, item, here)
            if key == "datasets" or (key == "values" and path.endswith(".data")):
                continue  # rows are data: their keys (a "url" column, say) are not options
            self.value(item, here, depth + 1)

    def _check(self, key: str, item: Any, here: str) -> None:
        if key in _LOADING_KEYS:
            raise _refuse(
                here,
                "a chart renders inline data only: no URL is loaded (put the rows in data.values)",
            )
        if key == "href":
            _check_link(item, here)
        elif key in _GENERATED_KEYS and isinstance(item, dict):
            self._count(_sequence_length(item, here), here)
        elif key == "graticule":
            _check_graticule(item, here)
        elif key == "values" and isinstance(item, list | str):
            # A list of rows, or CSV/JSON text (a row a line).
            rows = len(item) if isinstance(item, list) else item.count("\n") + 1
            self._count(rows, here)
        elif key == "datasets" and isinstance(item, dict):
            for name, rows in item.items():
                if not isinstance(rows, list):
                    raise _refuse(f"{here}.{name}", "a named dataset is a list of rows")
                self._count(len(rows), f"{here}.{name}")
        elif key in _STEP_KEYS and _is_number(item) and item > MAX_STEPS:
            raise _refuse(here, f"{item:g} is more than {MAX_STEPS:,}")
        elif key in _SIZE_KEYS and _is_number(item) and item > MAX_DIMENSION:
            raise _refuse(here, f"{item:g} pixels is more than {MAX_DIMENSION:,}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_link(value: Any, path: str) -> None:
    """A link is a literal http(s) URL: a mark property or a channel's `value`. One drawn from
    the data or an expression cannot be checked before rendering, so it is refused; a
    `javascript:` link once broke every later render of the process (issue 29)."""
    literal = value.get("value") if isinstance(value, dict) and set(value) == {"value"} else value
    if not isinstance(literal, str):
        raise _refuse(
            path,
            "a link must be a literal http(s) URL (a mark property or a channel's "
            "value), not a field or an expression",
        )
    if not literal.strip().lower().startswith(_LINK_SCHEMES):
        raise _refuse(path, f"a link must be an http(s) URL, not {literal[:40]!r}")


def _sequence_length(sequence: dict[str, Any], path: str) -> int:
    bounds: tuple[Any, ...] = (
        sequence.get("start", 0),
        sequence.get("stop"),
        sequence.get("step", 1),
    )
    if not all(_is_number(v) and math.isfinite(v) for v in bounds):
        raise _refuse(path, "a sequence needs finite numbers start, stop and step")
    start, stop, step = (float(v) for v in bounds)
    if step == 0:
        raise _refuse(path, "a sequence's step cannot be 0")
    return max(0, math.ceil((stop - start) / step))


def _check_graticule(value: Any, path: str) -> None:
    if value is True:
        return
    if not isinstance(value, dict):
        raise _refuse(path, "a graticule is true or an object of its parameters")
    for key in ("step", "stepMinor", "stepMajor"):
        steps = value.get(key)
        if steps is None:
            continue
        if not isinstance(steps, list) or not all(_is_number(s) for s in steps):
            raise _refuse(f"{path}.{key}", "a graticule's step is a list of two numbers")
        if any(s < MIN_GRATICULE_STEP for s in steps):
            raise _refuse(f"{path}.{key}", f"steps under {MIN_GRATICULE_STEP:g} degree")
    precision = value.get("precision")
    if precision is not None and not (_is_number(precision) and precision >= 1):
        raise _refuse(f"{path}.precision", "a graticule's precision is at least 1 degree")


def _views(node: Any, path: str) -> int:
    """Views a (sub)spec draws: concat and layer members add up, a repeat multiplies its
    inner spec. A facet's count depends on the data (the render's limits bound it)."""
    if not isinstance(node, dict):
        return 0
    for key in _CONCAT_KEYS:
        members = node.get(key)
        if isinstance(members, list):
            return max(1, sum(_views(m, f"{path}.{key}[{i}]") for i, m in enumerate(members)))
    if "repeat" in node and isinstance(node.get("spec"), dict):
        return _repeats(node["repeat"]) * _views(node["spec"], f"{path}.spec")
    if "facet" in node and isinstance(node.get("spec"), dict):
        return _views(node["spec"], f"{path}.spec")
    return 1


def _repeats(repeat: Any) -> int:
    if isinstance(repeat, list):
        return max(1, len(repeat))
    if isinstance(repeat, dict):
        count = 1
        for key in ("row", "column", "layer"):
            members = repeat.get(key)
            if isinstance(members, list):
                count *= max(1, len(members))
        return count
    return 1

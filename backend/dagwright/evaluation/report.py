"""An evaluation's report: the metric's aggregate with a bootstrap confidence interval,
breakdowns by the examples' attributes (answer type, Spider hardness, label...), cost and
latency per example, the failures with their runs, and chart-ready series."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dagwright.evaluation.batch import NO_ANSWER, is_blank

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95
MAX_GROUPS = 30  # an attribute with more distinct values is not a breakdown (ids, titles)
MAX_FAILURES = 200


@dataclass(slots=True)
class ResultRow:
    example_id: str
    score: float | None
    correct: bool | None
    question: str = ""
    prediction: Any = None
    gold: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    error: dict[str, Any] | None = None
    latency: float | None = None
    tokens: int = 0
    cost: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


def error_of(row: ResultRow) -> dict[str, Any] | None:
    """Why the example counts as an error: the system failed on it, or it gave no answer
    (results stored before no answer was recorded as such are read the same way)."""
    if row.error:
        return row.error
    if is_blank(row.prediction):
        return {"code": NO_ANSWER, "message": "the system gave no answer"}
    return None


def bootstrap_ci(
    scores: Sequence[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean (a fixed seed: a report is repeatable)."""
    import numpy as np

    if not scores:
        return (0.0, 0.0)
    values = np.asarray(scores, dtype=float)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (float(low), float(high))


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def breakdowns(rows: Sequence[ResultRow]) -> dict[str, list[dict[str, Any]]]:
    """attribute -> [{value, count, mean}] for every attribute with few distinct values."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        for key, value in row.meta.items():
            if isinstance(value, str | int | bool) or value is None:
                groups[key][str(value)].append(row.score or 0.0)
        outcome = "answered" if error_of(row) is None else "error"
        groups["outcome"][outcome].append(row.score or 0.0)
    result = {}
    for key, values in groups.items():
        if 1 < len(values) <= MAX_GROUPS or key == "outcome":
            result[key] = [
                {"value": value, "count": len(scores), "mean": sum(scores) / len(scores)}
                for value, scores in sorted(values.items())
            ]
    return result


def _histogram(values: Sequence[float], bins: int = 10) -> list[dict[str, float]]:
    if not values:
        return []
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / width), bins - 1)] += 1
    return [
        {"from": low + i * width, "to": low + (i + 1) * width, "count": float(c)}
        for i, c in enumerate(counts)
    ]


def build_report(
    metric: str, primary: str, aggregate: dict[str, float], rows: Sequence[ResultRow]
) -> dict[str, Any]:
    scores = [row.score or 0.0 for row in rows]
    low, high = bootstrap_ci(scores)
    latencies = [row.latency for row in rows if row.latency is not None]
    graded = any(row.correct is None for row in rows)
    errors = {row.example_id: error for row in rows if (error := error_of(row)) is not None}
    failures = [row for row in rows if row.correct is False or row.example_id in errors]
    if graded:  # no right or wrong: the lowest scores are the ones to read
        failures = sorted(rows, key=lambda r: r.score or 0.0)[: min(20, len(rows))]
    count = len(rows)
    return {
        "metric": metric,
        "primary": primary,
        "value": aggregate.get(primary),
        "aggregate": aggregate,
        "examples": count,
        "mean_example_score": sum(scores) / count if count else 0.0,
        "ci": {"low": low, "high": high, "confidence": CONFIDENCE, "of": "mean example score"},
        "breakdowns": breakdowns(rows),
        "cost": {
            "tokens": sum(r.tokens for r in rows),
            "cost": sum(r.cost for r in rows),
            "tokens_per_example": sum(r.tokens for r in rows) / count if count else 0.0,
            "cost_per_example": sum(r.cost for r in rows) / count if count else 0.0,
        },
        "latency": {
            "mean": sum(latencies) / len(latencies) if latencies else None,
            "p50": _quantile(latencies, 0.5),
            "p95": _quantile(latencies, 0.95),
        },
        "errors": len(errors),
        "errors_by_code": dict(Counter(str(e.get("code")) for e in errors.values())),
        "failures": [
            {
                "id": r.example_id,
                "question": r.question,
                "prediction": r.prediction,
                "gold": r.gold,
                "score": r.score,
                "error": errors.get(r.example_id),
                "run_id": r.run_id,
                "trace": f"/api/v1/runs/{r.run_id}" if r.run_id else None,
                **r.detail,
            }
            for r in failures[:MAX_FAILURES]
        ],
        "charts": {
            "latency_histogram": _histogram(latencies),
            "score_histogram": _histogram(scores) if graded else [],
        },
    }

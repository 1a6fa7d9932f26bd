"""What every metric returns: a score per example and the aggregates over them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Item:
    """One example to score: its id, its gold fields (per metric) and the prediction (None when
    the system gave none, which scores as wrong)."""

    id: str
    gold: dict[str, Any]
    prediction: Any


@dataclass(frozen=True, slots=True)
class ExampleScore:
    id: str
    score: float  # 1.0 / 0.0 for accuracies; the example's own value for graded metrics
    correct: bool | None = None  # None for graded metrics (BLEU, ROUGE)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScoreReport:
    metric: str
    primary: str  # the aggregate the metric is known by (e.g. accuracy, sacrebleu)
    aggregate: dict[str, float]
    examples: list[ExampleScore]
    notes: list[str] = field(default_factory=list)

    @property
    def value(self) -> float:
        return self.aggregate[self.primary]

    def to_dict(self, per_example: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {
            "metric": self.metric,
            "primary": self.primary,
            "value": self.value,
            "aggregate": self.aggregate,
            "count": len(self.examples),
            "notes": self.notes,
        }
        if per_example:
            result["examples"] = [
                {"id": e.id, "score": e.score, "correct": e.correct, **e.detail}
                for e in self.examples
            ]
        return result


def accuracy_report(metric: str, examples: list[ExampleScore], notes: list[str]) -> ScoreReport:
    """Accuracy as the official scripts print it: correct / examples (0 when there are none)."""
    correct = sum(1 for e in examples if e.correct)
    value = correct / len(examples) if examples else 0.0
    aggregate = {"accuracy": value, "correct": float(correct), "examples": float(len(examples))}
    return ScoreReport(metric, "accuracy", aggregate, examples, notes)

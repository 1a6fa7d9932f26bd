"""The publish gate's decision, from the numbers alone.

A version may be published when a waiver (with its reason) is recorded for it; otherwise
it must have been evaluated on the gate's dataset split with the gate's metric, and, when the
published version has such an evaluation too, score at least its score minus the tolerance.
With nothing published, or a published version never evaluated, there is nothing to fall
below: being evaluated is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class GateDecision:
    allowed: bool
    reason: str
    candidate: float | None  # the version's score
    published: float | None  # the published version's score
    tolerance: float
    waiver: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "reason": self.reason,
            "candidate": self.candidate,
            "published": self.published,
            "tolerance": self.tolerance,
            "threshold": None if self.published is None else self.published - self.tolerance,
            "waiver": self.waiver,
        }


def decide(
    candidate: float | None, published: float | None, tolerance: float, waiver: str | None
) -> GateDecision:
    if waiver is not None:
        return GateDecision(True, f"waived: {waiver}", candidate, published, tolerance, waiver)
    if candidate is None:
        return GateDecision(
            False, "the version has not been evaluated", candidate, published, tolerance
        )
    if published is None:
        return GateDecision(
            True, "evaluated; no published score to compare with", candidate, published, tolerance
        )
    threshold = published - tolerance
    # A hair of slack: scores are means of floats, 0.7 - 0.0 must not fail against 0.7.
    if candidate + 1e-12 < threshold:
        return GateDecision(
            False,
            f"scores {candidate:.4f}, below the published version's {published:.4f} minus the "
            f"tolerance {tolerance:.4f} (= {threshold:.4f})",
            candidate,
            published,
            tolerance,
        )
    return GateDecision(
        True,
        f"scores {candidate:.4f}, at least {threshold:.4f} (published {published:.4f} - "
        f"tolerance {tolerance:.4f})",
        candidate,
        published,
        tolerance,
    )

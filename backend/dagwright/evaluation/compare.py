"""Two evaluations side by side over the examples both scored: the difference of the mean
example score with a paired bootstrap interval, a paired significance test, and the examples
that flipped.

The test is McNemar's exact test when both are right/wrong (a two-sided binomial test on the
discordant pairs: only examples one got right and the other wrong carry information), and a
paired sign-flip permutation test on the per-example differences for graded scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import comb
from typing import Any

from dagwright.evaluation.report import BOOTSTRAP_RESAMPLES, CONFIDENCE

PERMUTATIONS = 10_000


@dataclass(frozen=True, slots=True)
class Scored:
    score: float
    correct: bool | None


def mcnemar_exact(gained: int, lost: int) -> float:
    """Two-sided exact McNemar p-value for `gained` (b) and `lost` (c) discordant pairs."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(comb(n, k) for k in range(min(gained, lost) + 1)) / 2**n
    return float(min(1.0, 2 * tail))


def sign_flip_test(differences: list[float], seed: int = 0) -> float:
    """Two-sided p-value of the mean difference under random sign flips (with the +1
    correction, so it is never 0)."""
    import numpy as np

    values = np.asarray(differences, dtype=float)
    if not len(values) or not values.any():
        return 1.0
    observed = abs(values.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(PERMUTATIONS, len(values)))
    extreme = int((np.abs((signs * values).mean(axis=1)) >= observed - 1e-12).sum())
    return (extreme + 1) / (PERMUTATIONS + 1)


def paired_bootstrap(differences: list[float], seed: int = 0) -> tuple[float, float]:
    import numpy as np

    if not differences:
        return (0.0, 0.0)
    values = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))
    means = values[picks].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return (float(low), float(high))


def compare(a: Mapping[str, Scored], b: Mapping[str, Scored]) -> dict[str, Any]:
    """B against A (differences are B - A)."""
    common = [key for key in a if key in b]
    differences = [b[k].score - a[k].score for k in common]
    binary = all(a[k].correct is not None and b[k].correct is not None for k in common)
    n = len(common)
    result: dict[str, Any] = {
        "examples": n,
        "only_in_a": len(a) - n,
        "only_in_b": len(b) - n,
        "mean_a": sum(a[k].score for k in common) / n if n else 0.0,
        "mean_b": sum(b[k].score for k in common) / n if n else 0.0,
        "difference": sum(differences) / n if n else 0.0,
    }
    low, high = paired_bootstrap(differences)
    result["ci"] = {"low": low, "high": high, "confidence": CONFIDENCE}
    if binary:
        gained = [k for k in common if b[k].correct and not a[k].correct]
        lost = [k for k in common if a[k].correct and not b[k].correct]
        result["test"] = {"name": "mcnemar_exact", "p_value": mcnemar_exact(len(gained), len(lost))}
    else:
        gained = [k for k in common if b[k].score > a[k].score]
        lost = [k for k in common if b[k].score < a[k].score]
        result["test"] = {"name": "paired_sign_flip", "p_value": sign_flip_test(differences)}
    result["gained"] = gained  # better in B
    result["lost"] = lost  # better in A
    return result

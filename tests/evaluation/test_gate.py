"""The publish gate's decision on hand-made numbers."""

from __future__ import annotations

from dagwright.evaluation.gate import decide


def test_gate_decisions() -> None:
    assert not decide(None, 0.7, 0.0, None).allowed  # never evaluated
    assert decide(0.5, None, 0.0, None).allowed  # nothing to compare with
    assert decide(0.7, 0.7, 0.0, None).allowed  # equal is enough
    assert decide(0.65, 0.7, 0.05, None).allowed  # within the tolerance
    refused = decide(0.64, 0.7, 0.05, None)
    assert not refused.allowed
    assert refused.to_dict()["threshold"] == 0.7 - 0.05
    assert "0.6400" in refused.reason
    waived = decide(None, 0.7, 0.0, "hotfix for a security issue")
    assert waived.allowed
    assert waived.waiver == "hotfix for a security issue"

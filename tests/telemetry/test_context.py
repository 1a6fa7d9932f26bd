"""W3C traceparent parsing and the ids of a run's spans."""

from __future__ import annotations

from dagwright.telemetry.context import TraceParent, span_id_for, trace_id_for

HEADER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_round_trips() -> None:
    parent = TraceParent.parse(HEADER)
    assert parent == TraceParent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True)
    assert parent.header() == HEADER
    unsampled = TraceParent.parse(HEADER[:-2] + "00")
    assert unsampled is not None
    assert not unsampled.sampled


def test_a_bad_traceparent_is_ignored() -> None:
    for bad in (
        None,
        "",
        "garbage",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # unknown version
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # zero span id
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
    ):
        assert TraceParent.parse(bad) is None, bad


def test_span_ids_are_stable_per_run_and_key() -> None:
    assert span_id_for("r1", "node:a") == span_id_for("r1", "node:a")
    assert (
        len({span_id_for("r1", "node:a"), span_id_for("r1", "node:b"), span_id_for("r2", "node:a")})
        == 3
    )
    assert 0 < span_id_for("r1", "run") < 2**64
    assert 0 < trace_id_for("r1") < 2**128

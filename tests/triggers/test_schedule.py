"""Cron ticks in a time zone, the missed-tick policy and webhook signatures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dagwright.services.triggers import (
    GRACE,
    TriggerError,
    check_schedule,
    due_ticks,
    ticks_between,
)
from dagwright.services.webhook_signing import signature


def test_a_schedule_is_read_in_its_time_zone_across_daylight_saving() -> None:
    # Paris moves to summer time on 2026-03-29: 9:00 local is 8:00 UTC, then 7:00 UTC.
    after = datetime(2026, 3, 27, 12, tzinfo=UTC)
    until = datetime(2026, 3, 30, 12, tzinfo=UTC)
    ticks = ticks_between("0 9 * * *", "Europe/Paris", after, until)
    assert ticks == [
        datetime(2026, 3, 28, 8, tzinfo=UTC),
        datetime(2026, 3, 29, 7, tzinfo=UTC),
        datetime(2026, 3, 30, 7, tzinfo=UTC),
    ]


def test_seconds_are_a_sixth_field() -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    ticks = ticks_between("* * * * * */20", "UTC", after, after + timedelta(minutes=1))
    assert [t.second for t in ticks] == [20, 40, 0]


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(TriggerError, match="not a valid schedule"):
        check_schedule("every day", "UTC")
    with pytest.raises(TriggerError, match="unknown time zone"):
        check_schedule("0 9 * * *", "Mars/Olympus")


def test_missed_ticks_follow_the_policy() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    missed = [now - timedelta(minutes=m) for m in (30, 20, 10)]
    on_time = [now - timedelta(seconds=GRACE / 2)]
    ticks = missed + on_time
    assert due_ticks(ticks, now, "latest") == [missed[-1], *on_time]
    assert due_ticks(ticks, now, "skip") == on_time
    assert due_ticks(ticks, now, "all") == ticks
    assert due_ticks(missed, now, "skip") == []


def test_the_signature_is_an_hmac_of_the_timestamp_and_the_body() -> None:
    # Checked against a value computed apart (`printf '%s' "1700000000.what do ya want for
    # nothing?" | openssl dgst -sha256 -hmac Jefe`): the message is "<timestamp>.<body>".
    expected = "1cdd0650c8be1cb0974b1788d458b1e781206cfef59b85faafc582d2e182c57e"
    body = b"what do ya want for nothing?"
    assert signature("Jefe", 1_700_000_000, body) == f"sha256={expected}"

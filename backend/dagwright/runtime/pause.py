"""A run that stops to wait for a person (the `human_input` block, services/human.py).

A pause is not a failure: a node raising WaitingForHuman ends its run, which is recorded as
`waiting`; no error policy retries it or turns it into a default. Inside a sub-flow, a map
item or a repeat round it ends that iteration, and the sub-flow node raises it in turn once
its other items have run (runtime/iteration.py), so the pause reaches the root run whatever
the depth. The continuation passes on what had finished, nested paths included
(`loop[2]/approve`), with the answers as the paused nodes' outputs."""

from __future__ import annotations

from typing import Final

from dagwright.errors import DagwrightError
from dagwright.runtime.events import RunError

WAITING_FOR_HUMAN: Final = "waiting_for_human"


class WaitingForHuman(DagwrightError):
    """Raised by a node that waits for a person: its run stops here until the request (or
    every request, when several map items wait) is answered."""

    code = WAITING_FOR_HUMAN


def is_pause(error: RunError | None) -> bool:
    """Whether a finished run stopped to wait for a person rather than failing."""
    return error is not None and error.code == WAITING_FOR_HUMAN

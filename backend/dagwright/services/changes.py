"""Changes a service announces to whoever keeps something derived from what changed.

A service that changes what a published endpoint answers with (an app renamed, deleted or
published; a key revoked) announces it; listeners (the endpoint cache) subscribe once, where
the services are put together. The service does not know who listens, and no route has to
remember to tell anyone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Subject = Literal["app", "version", "key"]
Action = Literal["created", "updated", "deleted", "published", "revoked"]


@dataclass(frozen=True, slots=True)
class Change:
    subject: Subject
    action: Action
    id: str  # the changed row's id


Listener = Callable[[Change], None]


class Changes:
    """Listeners of one service's changes; they are called in the announcing thread, after
    the change is committed, so a listener that reads the database sees it."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def announce(self, change: Change) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(change)

"""What the scripted server remembers between requests: sequence positions and statistics."""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass
from typing import TypedDict

from dagwright.llm.scripted.script import Reply, Rule, Script

LOG_SIZE = 200
# Logged messages are cut to this many characters: prompts can be long.
LOGGED_TEXT_LIMIT = 200


class LogEntry(TypedDict):
    endpoint: str
    model: str | None
    last_message: str | None
    rule: str | None
    fault: str | None
    status: int | None


class Stats(TypedDict):
    requests: int
    in_flight: int
    max_in_flight: int
    by_rule: dict[str, int]
    log: list[LogEntry]


def shorten(text: str, limit: int = LOGGED_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Exchange:
    """One request as the server saw it; filled in while it is handled, logged at its end."""

    endpoint: str
    model: str | None = None
    last_message: str | None = None
    rule: str | None = None
    fault: str | None = None
    status: int | None = None

    def entry(self) -> LogEntry:
        return LogEntry(
            endpoint=self.endpoint,
            model=self.model,
            last_message=None if self.last_message is None else shorten(self.last_message),
            rule=self.rule,
            fault=self.fault,
            status=self.status,
        )


class ScriptedState:
    """Counters, sequence positions and the request log of one scripted server.

    Requests are handled on the server's event loop, so updates never interleave there;
    the lock is for readers on other threads (`ScriptedServer.stats`).
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self._lock = threading.Lock()
        self._positions: dict[int, int] = {}
        self._by_rule: Counter[str] = Counter()
        self._log: deque[LogEntry] = deque(maxlen=LOG_SIZE)
        self._requests = 0
        self._in_flight = 0
        self._max_in_flight = 0

    def next_reply(self, index: int, rule: Rule) -> Reply:
        """The reply for the next request rule ``index`` answers; advances its sequence."""
        sequence = rule.sequence
        with self._lock:
            position = self._positions.get(index, 0)
            self._positions[index] = position + 1
            self._by_rule[rule.name] += 1
        if rule.cycle:
            return sequence[position % len(sequence)]
        return sequence[min(position, len(sequence) - 1)]

    def count_default(self, name: str) -> None:
        """Count a request answered by the script's default reply."""
        with self._lock:
            self._by_rule[name] += 1

    def begin(self) -> None:
        """A request arrived."""
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def end(self, exchange: Exchange) -> None:
        """A request is answered (or abandoned): log it."""
        with self._lock:
            self._in_flight -= 1
            self._log.append(exchange.entry())

    def reset(self) -> None:
        """Forget counters, sequence positions and the log (requests in flight stay counted)."""
        with self._lock:
            self._positions.clear()
            self._by_rule.clear()
            self._log.clear()
            self._requests = 0
            self._max_in_flight = self._in_flight

    def stats(self) -> Stats:
        """A snapshot of the statistics."""
        with self._lock:
            return Stats(
                requests=self._requests,
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                by_rule=dict(self._by_rule),
                log=list(self._log),
            )

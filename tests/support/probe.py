"""A health probe: proof that an attack on the server made nobody else wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import httpx

R = TypeVar("R")

# What "the server stayed responsive" means: every probe answered within this.
PROBE_LIMIT_S = 1.0
PROBE_INTERVAL_S = 0.05


@dataclass
class HealthProbe:
    """GET /api/v1/health every 50 ms from a thread of its own, timing each answer."""

    base_url: str
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _loop(self) -> None:
        with httpx.Client(timeout=10.0) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    response = client.get(f"{self.base_url}/api/v1/health")
                    if response.status_code != 200:
                        self.failures.append(f"health answered {response.status_code}")
                except httpx.HTTPError as exc:
                    self.failures.append(f"health failed: {exc!r}")
                self.latencies.append(time.perf_counter() - started)
                self._stop.wait(PROBE_INTERVAL_S)

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)


@contextmanager
def health_probe(base_url: str, limit_s: float = PROBE_LIMIT_S) -> Iterator[HealthProbe]:
    """Probe the server while the block runs; then assert every probe answered under limit_s
    (and that the probe ran at all, so a silent probe cannot pass)."""
    probe = HealthProbe(base_url)
    thread = threading.Thread(target=probe._loop, name="health-probe", daemon=True)
    thread.start()
    # Attack only once the probe has had an answer: on a loaded machine a quick attack could
    # otherwise end before the probe's first request, and prove nothing.
    ready_by = time.monotonic() + 10
    while not probe.latencies and time.monotonic() < ready_by:
        time.sleep(0.01)
    try:
        yield probe
    finally:
        time.sleep(PROBE_INTERVAL_S * 2)  # at least one probe after the attack's answer
        probe._stop.set()
        thread.join(15)
    assert probe.latencies, "the health probe never ran"
    assert not probe.failures, probe.failures
    assert probe.worst < limit_s, f"a health probe waited {probe.worst:.2f} s (limit {limit_s})"


# How long a refused attack may take at most; the probe's 1 s is the strict check, this one is
# generous for a loaded machine.
QUICK_S = 5.0


def timed(base_url: str, request: Callable[[], R]) -> tuple[R, float]:
    """The answer of `request()`, made while the health probe runs, and how long it took
    (asserted under QUICK_S)."""
    with health_probe(base_url):
        started = time.perf_counter()
        response = request()
        elapsed = time.perf_counter() - started
    assert elapsed < QUICK_S, f"took {elapsed:.1f} s"
    return response, elapsed

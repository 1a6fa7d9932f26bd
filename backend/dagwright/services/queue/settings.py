"""Queue mode's settings: the part of the process's settings (dagwright/settings.py, the
DAGWRIGHT_QUEUE and DAGWRIGHT_WORKER_* variables) the queue uses, given by the composition
root."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagwright.errors import DagwrightError


class QueueConfigError(DagwrightError):
    code = "queue_config"


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Off by default: the embedded default runs everything in the server process."""

    enabled: bool = False  # DAGWRIGHT_QUEUE=procrastinate
    # Runs one worker process executes at once (they are mostly waiting on models and I/O).
    concurrency: int = 16
    # Queued runs (not yet started) beyond which a new one is refused with 429.
    max_depth: int = 10_000
    # Queued or running queue runs of one app beyond which its new ones are refused (429).
    app_limit: int = 1_000
    # A worker refreshes its heartbeat this often; one silent for `stalled_after` seconds is
    # dead and its runs are resumed by the others (keep it well above pauses of a busy loop).
    heartbeat: float = 2.0
    stalled_after: float = 15.0
    retry_after: int = 2  # seconds, the Retry-After of a refused run
    # After SIGTERM, how long a worker lets its jobs run on before it hands those still
    # going back to the queue (keep it under the platform's kill delay: docker-compose.yml).
    shutdown_grace: float = 30.0
    # How often an idle worker looks for jobs without being told of one: a new job is
    # announced (LISTEN/NOTIFY), but a job that becomes free is not (one retried, or the next
    # chunk of an evaluation's lane once the one before it finishes).
    poll_interval: float = 1.0
    # Examples per job of a queued evaluation: small enough to spread an evaluation over the
    # workers, large enough that a job's own cost (fetch, finish) stays small beside them.
    evaluation_chunk: int = 10
    # A file the worker touches every heartbeat, for a container's health check.
    alive_file: Path | None = None

    def __post_init__(self) -> None:
        if min(self.concurrency, self.max_depth, self.app_limit, self.evaluation_chunk) < 1:
            raise QueueConfigError("queue concurrency and limits must be at least 1")
        if not 0 < self.heartbeat < self.stalled_after:
            raise QueueConfigError(
                "DAGWRIGHT_WORKER_STALLED_AFTER must be longer than DAGWRIGHT_WORKER_HEARTBEAT"
            )
        if self.poll_interval <= 0:
            raise QueueConfigError("DAGWRIGHT_WORKER_POLL_INTERVAL must be positive")
        if self.shutdown_grace < 0:
            raise QueueConfigError("DAGWRIGHT_WORKER_SHUTDOWN_GRACE cannot be negative")

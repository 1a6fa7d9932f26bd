"""Replica leases: which server processes are alive, so that the runs of dead ones are closed.

Every server process holds a lease, a `replicas` row with an id of its own (a fresh id per
process, whatever replica name it was given: `dagwright serve --workers 2`, or a restarted
process, share a name but not a lease). The process inserts it before it records any run,
refreshes its `heartbeat_at` every `heartbeat` seconds, and deletes it at a clean shut-down
once its runs are recorded. A run names the lease of the process running it (`runs.replica`).

`ReplicaLease.recover(stale_after)` closes what dead processes left: every queued or running
run whose lease is missing or stale (no heartbeat for `stale_after` seconds) is marked
"interrupted", whichever replica it belonged to, and the dead leases are deleted. Every
process does so at start-up and then periodically, so the runs of a process that died for
good are closed by the survivors. Each step is one idempotent statement, so processes that
recover at the same time do not get in each other's way.

A lease of this host whose process is gone is dead at once, without waiting for it to go
stale: a restarted server finds the runs of the process it replaces interrupted before it
answers. "This host" means the same host name, replica name and PID namespace (the kernel's
boot id and the namespace, on Linux), so a process of another machine or of another container
is never looked up by a pid that means nothing here.

Times are the processes' clocks in UTC (`utcnow()`): the heartbeats of processes on several
hosts are compared with each other, which assumes their clocks are synchronised (NTP) to well
within `stale_after`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Connection, Engine, Table, delete, insert, or_, select, update

from dagwright.services.runs.writer import RUNS
from dagwright.store.models import Replica, new_id, utcnow

log = logging.getLogger(__name__)

REPLICAS: Final[Table] = Replica.metadata.tables["replicas"]
HEARTBEAT: Final = 2.0  # seconds between refreshes of a lease
STALE_AFTER: Final = 10.0  # a lease not refreshed for this long belongs to a dead process
ACTIVE_STATUSES: Final = ("queued", "running")
INTERRUPTED_ERROR: Final = {
    "code": "interrupted",
    "message": "the server stopped while the run was in progress",
    "node": None,
}

Submit = Callable[[Callable[[Connection], object]], Future[None]]


def pid_namespace() -> str | None:
    """Where this process's pid means something: '<boot id>/pid:[<inode>]' on Linux (one
    kernel boot, one PID namespace), None where that cannot be read."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except (OSError, UnicodeDecodeError):
        return None
    return f"{boot}/{namespace}"[:128]


def pid_alive(pid: int) -> bool:
    """False only when no process `pid` exists here; True when unsure."""
    if os.name != "posix" or pid <= 0:  # on Windows, os.kill(pid, 0) would kill it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, as another user
        return True
    return True


class ReplicaLease:
    """The lease of this process. `acquire()` it, keep it fresh with `start_heartbeat()`,
    `release()` it at shut-down."""

    def __init__(self, engine: Engine, name: str, *, heartbeat: float = HEARTBEAT) -> None:
        if heartbeat <= 0:
            raise ValueError("heartbeat must be positive")
        self.engine = engine
        self.name = name
        self.heartbeat = heartbeat
        self.id = new_id()
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.pid_namespace = pid_namespace()
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._pending: Future[None] | None = None

    # -- the lease ----------------------------------------------------------------------------

    def acquire(self) -> None:
        """Insert the lease (in a transaction of its own; committed when this returns)."""
        if self.pid != os.getpid():  # made before a fork: the child is another process
            self.id, self.pid = new_id(), os.getpid()
        with self.engine.begin() as conn:
            exists = conn.execute(select(REPLICAS.c.id).where(REPLICAS.c.id == self.id)).first()
            if exists is None:
                conn.execute(insert(REPLICAS).values(self._row()))
            else:
                self.beat(conn)

    def beat(self, conn: Connection) -> None:
        """Refresh the heartbeat, in the caller's transaction. A lease that another process
        deleted as stale (this one was too slow to beat) is inserted again."""
        now = utcnow()
        refreshed = conn.execute(
            update(REPLICAS).where(REPLICAS.c.id == self.id).values(heartbeat_at=now)
        ).rowcount
        if not refreshed:
            log.warning(
                "replica lease %s (%s) had expired: runs of this process may have been marked "
                "interrupted; taking the lease again",
                self.id,
                self.name,
            )
            conn.execute(insert(REPLICAS).values(self._row()))

    def release(self) -> None:
        """Delete the lease: this process records no more runs."""
        with self.engine.begin() as conn:
            conn.execute(delete(REPLICAS).where(REPLICAS.c.id == self.id))

    def _row(self) -> dict[str, Any]:
        now = utcnow()
        return {
            "id": self.id,
            "name": self.name,
            "pid": self.pid,
            "host": self.host,
            "pid_namespace": self.pid_namespace,
            "started_at": now,
            "heartbeat_at": now,
        }

    # -- the heartbeat --------------------------------------------------------------------------

    def start_heartbeat(self, submit: Submit | None = None) -> None:
        """Refresh the lease every `heartbeat` seconds from a thread of its own. With `submit`
        (e.g. RunWriter.call), each refresh is handed to it instead of written in a transaction
        of its own: the lease then stays fresh exactly as long as that writer writes."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            stop = threading.Event()
            thread = threading.Thread(
                target=self._beat_forever,
                args=(stop, submit),
                name="dagwright-heartbeat",
                daemon=True,
            )
            self._stop, self._thread = stop, thread
            thread.start()

    def stop_heartbeat(self, timeout: float = 10.0) -> None:
        """Stop refreshing (the lease stays: it goes stale, as a dead process's would)."""
        with self._lock:
            stop, thread = self._stop, self._thread
            self._stop = self._thread = None
        if stop is not None:
            stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def beating(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _beat_forever(self, stop: threading.Event, submit: Submit | None) -> None:
        while not stop.wait(self.heartbeat):
            try:
                if submit is None:
                    with self.engine.begin() as conn:
                        self.beat(conn)
                    continue
                pending = self._pending
                if pending is not None and not pending.done():
                    continue  # the last one is still waiting for its commit
                self._pending = future = submit(self.beat)
                future.add_done_callback(self._beaten)
            except Exception:  # the database may be briefly unreachable: next time
                log.warning("refreshing replica lease %s failed", self.id, exc_info=True)

    def _beaten(self, future: Future[None]) -> None:
        error = None if future.cancelled() else future.exception()
        if error is not None:
            log.warning("refreshing replica lease %s failed: %s", self.id, error)

    # -- recovery -----------------------------------------------------------------------------

    def recover(self, stale_after: float = STALE_AFTER) -> int:
        """Mark "interrupted" the queued and running runs of every other process whose lease
        is missing, stale (older than `stale_after` seconds) or of a process gone from this
        host; delete those leases. Never touches this lease's runs. Returns how many runs."""
        cutoff = utcnow() - timedelta(seconds=stale_after)
        with self.engine.connect() as conn:
            leases = conn.execute(
                select(
                    REPLICAS.c.id,
                    REPLICAS.c.name,
                    REPLICAS.c.host,
                    REPLICAS.c.pid,
                    REPLICAS.c.pid_namespace,
                    (REPLICAS.c.heartbeat_at <= cutoff).label("stale"),
                ).where(REPLICAS.c.id != self.id)
            ).all()
        gone = [lease.id for lease in leases if not lease.stale and self._gone(lease)]
        dead = [lease.id for lease in leases if lease.stale] + gone
        if dead:
            # First, and each step alone: a lease that is missing is as dead as a stale one,
            # so a crash between the steps loses nothing. A stale lease that was refreshed
            # meanwhile is kept.
            with self.engine.begin() as conn:
                conn.execute(
                    delete(REPLICAS).where(
                        REPLICAS.c.id.in_(dead),
                        or_(REPLICAS.c.heartbeat_at <= cutoff, REPLICAS.c.id.in_(gone)),
                    )
                )
            names = sorted({lease.name for lease in leases if lease.id in dead})
            log.info("replica leases expired: %d (%s)", len(dead), ", ".join(names))
        # One statement, whose subquery sees the leases as of the same moment as the runs: a
        # process's lease is committed before any of its runs, so a run is never taken for
        # orphaned because its lease arrived a moment after the look.
        live = select(REPLICAS.c.id).where(REPLICAS.c.heartbeat_at > cutoff)
        orphaned = (
            RUNS.c.status.in_(ACTIVE_STATUSES),
            # A queue job's run is resumed by another worker (services/queue), not closed.
            RUNS.c.job_id.is_(None),
            RUNS.c.replica != self.id,
            RUNS.c.replica.not_in(live),
        )
        with self.engine.connect() as conn:  # a read first: no write lock when nothing is due
            if conn.execute(select(RUNS.c.id).where(*orphaned).limit(1)).first() is None:
                return 0
        with self.engine.begin() as conn:
            marked = conn.execute(
                update(RUNS)
                .where(*orphaned)
                .values(status="interrupted", finished_at=utcnow(), error=dict(INTERRUPTED_ERROR))
            ).rowcount
        if marked:
            log.warning("marked %d run(s) of stopped server processes interrupted", marked)
        return int(marked)

    def _gone(self, lease: Any) -> bool:
        """A lease of a process that ran here, under this name, and exists no more."""
        return (
            lease.host == self.host
            and lease.name == self.name
            and lease.pid_namespace == self.pid_namespace
            and lease.pid != os.getpid()
            and not pid_alive(lease.pid)
        )


__all__ = [
    "ACTIVE_STATUSES",
    "HEARTBEAT",
    "INTERRUPTED_ERROR",
    "REPLICAS",
    "STALE_AFTER",
    "ReplicaLease",
    "pid_alive",
    "pid_namespace",
]

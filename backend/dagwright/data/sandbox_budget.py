"""The host-wide budget every Python sandbox call takes a share of before it starts.

One host runs several processes that start sandboxes (uvicorn workers, queue workers, CLI
runs), so a budget kept in one process's memory would not hold. The budget is kept in a
folder of lock files instead (`<tmp>/dagwright-budget-<uid>` unless set): `slot-0` ..
`slot-<N-1>`, one per call that may run at once, each locked with flock(2) by the call that
holds it and holding the MB that call is charged; `ledger` serialises taking a slot. A lock
dies with its process, so a killed server frees its slots at once, with no clean-up to do.
Chosen over a cgroup because it needs no privilege and holds on every host; where the host
offers cgroups each call gets one too (`dagwright.data.sandbox_cgroup`), which enforces the
share it was charged.

A call that finds no free slot, or not enough memory left, waits (at most `queue_max` calls
of this process wait at once, each at most `queue_wait_s`) and then fails with
`SandboxBusyError` (`sandbox_busy`, HTTP 429 with Retry-After). A call that could never fit
(memory_mb above the ceiling) fails at once with `sandbox_limit`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dagwright.errors import SandboxBusyError, SandboxError

# What a call costs besides its memory_mb: the interpreter with pandas and pyarrow imported.
BASE_MB = 256
_DEFAULT_CALL_CEILING_MB = 4096
_POLL_S = 0.05  # how often a waiting call looks again for slots freed by other processes


def machine_cores() -> int:
    return len(os.sched_getaffinity(0)) or 1


def machine_memory_mb() -> int:
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024))


@dataclass(frozen=True, slots=True)
class SandboxBudget:
    """The host's share for sandboxes. Zero means "derive from this machine": as many calls
    at once as cores, half of the RAM for all of them, a call at most min(4 GB, the budget),
    and as many waiting calls (per process) as slots: a waiting call holds a worker thread,
    which other blocks need too."""

    max_concurrent: int = 0
    memory_mb: int = 0
    max_call_mb: int = 0
    queue_wait_s: float = 5.0
    queue_max: int = 0
    folder: str = ""

    def resolved(self) -> SandboxBudget:
        concurrent = self.max_concurrent or machine_cores()
        memory = self.memory_mb or machine_memory_mb() // 2
        return SandboxBudget(
            max_concurrent=concurrent,
            memory_mb=memory,
            max_call_mb=self.max_call_mb or min(_DEFAULT_CALL_CEILING_MB, memory),
            queue_wait_s=self.queue_wait_s,
            queue_max=self.queue_max or concurrent,
            folder=self.folder
            or os.path.join(tempfile.gettempdir(), f"dagwright-budget-{os.geteuid()}"),
        )


def default_folder() -> str:
    """One per user of the host: every process of that user shares it."""
    return os.path.join(tempfile.gettempdir(), f"dagwright-budget-{os.geteuid()}")


def charge_mb(memory_mb: int, scratch_mb: int) -> int:
    """What one call is charged (and, with a cgroup, allowed): its memory, its scratch
    tmpfs (which is memory too) and the interpreter."""
    return memory_mb + scratch_mb + BASE_MB


class _Ledger:
    """This process's side of one budget folder: the waiting calls, and a condition that
    wakes them when a call of this process frees its slot."""

    def __init__(self, budget: SandboxBudget) -> None:
        self.budget = budget
        self.folder = _own_folder(Path(budget.folder))
        self.waiting = 0
        self.changed = threading.Condition()

    def try_take(self, charge: int) -> tuple[int | None, str]:
        """A locked slot descriptor, or None and why not. Runs under the ledger lock, so no
        two calls of the host count the slots at the same time."""
        ledger = _open(self.folder / "ledger")
        free: int | None = None
        try:
            fcntl.flock(ledger, fcntl.LOCK_EX)
            used, taken = 0, 0
            for index in range(self.budget.max_concurrent):
                fd = _open(self.folder / f"slot-{index}")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    used += _charge_in(fd)
                    taken += 1
                    os.close(fd)
                    continue
                if free is None:
                    free = fd
                else:
                    os.close(fd)  # closing drops the lock: it stays free
            if free is None:
                return None, f"all {taken} sandbox slots of this host are in use"
            if used + charge > self.budget.memory_mb:  # the slot is let go below
                return None, (
                    f"the sandboxes running hold {used} of this host's {self.budget.memory_mb}"
                    f" MB; this call needs {charge} MB"
                )
            os.ftruncate(free, 0)
            os.pwrite(free, f"{charge} {os.getpid()}\n".encode(), 0)
            taken_fd, free = free, None
            return taken_fd, ""
        finally:
            if free is not None:  # an error half-way: the slot must not stay held
                os.close(free)
            os.close(ledger)  # and with it the ledger lock

    def release(self, fd: int) -> None:
        os.close(fd)
        with self.changed:
            self.changed.notify_all()


_ledgers: dict[SandboxBudget, _Ledger] = {}
_ledgers_lock = threading.Lock()


def _ledger(budget: SandboxBudget) -> _Ledger:
    with _ledgers_lock:
        found = _ledgers.get(budget)
        if found is None:
            found = _ledgers[budget] = _Ledger(budget)
        return found


def check_call(budget: SandboxBudget, memory_mb: int, scratch_mb: int) -> None:
    """Raises `sandbox_limit` for a call that no free host could ever start."""
    budget = budget.resolved()
    if memory_mb > budget.max_call_mb:
        raise SandboxError(
            f"memory_mb {memory_mb} is above this server's ceiling of {budget.max_call_mb} MB "
            "per sandbox call (DAGWRIGHT_SANDBOX_MAX_CALL_MB)",
            "sandbox_limit",
        )
    charge = charge_mb(memory_mb, scratch_mb)
    if charge > budget.memory_mb:
        raise SandboxError(
            f"the call needs {charge} MB (memory_mb {memory_mb}, scratch {scratch_mb}, "
            f"interpreter {BASE_MB}), more than the {budget.memory_mb} MB this server gives "
            "all sandboxes together (DAGWRIGHT_SANDBOX_MEMORY_BUDGET_MB)",
            "sandbox_limit",
        )


@contextlib.contextmanager
def share(budget: SandboxBudget, memory_mb: int, scratch_mb: int) -> Iterator[int]:
    """Holds a slot and `charge_mb` of the host's budget while the block runs; yields the
    charge in MB. Raises `sandbox_limit` or `sandbox_busy` (see the module)."""
    check_call(budget, memory_mb, scratch_mb)
    ledger = _ledger(budget.resolved())
    charge = charge_mb(memory_mb, scratch_mb)
    fd = _take(ledger, charge)
    try:
        yield charge
    finally:
        ledger.release(fd)


def _take(ledger: _Ledger, charge: int) -> int:
    budget = ledger.budget
    fd, why = ledger.try_take(charge)
    if fd is not None:
        return fd
    with ledger.changed:
        if ledger.waiting >= budget.queue_max:
            raise _busy(budget, f"{why}, and {ledger.waiting} calls wait already")
        ledger.waiting += 1
    try:
        deadline = time.monotonic() + budget.queue_wait_s
        while (left := deadline - time.monotonic()) > 0:
            with ledger.changed:
                # Woken by a call of this process ending; other processes' are seen by polling.
                ledger.changed.wait(min(_POLL_S, left))
            fd, why = ledger.try_take(charge)
            if fd is not None:
                return fd
    finally:
        with ledger.changed:
            ledger.waiting -= 1
    raise _busy(budget, f"{why}, still after waiting {budget.queue_wait_s:g} s")


def _busy(budget: SandboxBudget, why: str) -> SandboxBusyError:
    return SandboxBusyError(
        f"the Python sandbox is busy: {why}; try again shortly",
        retry_after=max(1.0, budget.queue_wait_s),
    )


def in_use(budget: SandboxBudget) -> int:
    """How many slots of the budget's folder are held now, by any process (for tests and
    the health of the host)."""
    ledger = _ledger(budget.resolved())
    held = 0
    lock = _open(ledger.folder / "ledger")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a call taking a slot tries the free ones too
        for index in range(ledger.budget.max_concurrent):
            fd = _open(ledger.folder / f"slot-{index}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held += 1
            finally:
                os.close(fd)
    finally:
        os.close(lock)
    return held


def _own_folder(folder: Path) -> Path:
    """The budget folder, made private: in a shared /tmp another user could otherwise make
    it first and hold every slot, or plant links."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o022:
        raise SandboxError(
            f"the sandbox budget folder {folder} is not a private folder of this user: no "
            "code is run",
            "sandbox_unavailable",
        )
    return folder


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SandboxError(
                f"{path} is a link: the sandbox budget refuses it", "sandbox_unavailable"
            ) from None
        raise


def _charge_in(fd: int) -> int:
    """The MB a held slot is charged (its holder wrote it under the ledger lock)."""
    text = os.pread(fd, 64, 0).decode("ascii", errors="replace").split()
    return int(text[0]) if text and text[0].isdigit() else 0


# The ceiling block configurations are checked against when a flow is saved or checked: the
# server's, once its composition root set it; else this machine's default.
_ceiling: list[int] = []


def set_ceiling(budget: SandboxBudget) -> None:
    _ceiling[:] = [budget.resolved().max_call_mb]


def ceiling_mb() -> int:
    return _ceiling[0] if _ceiling else SandboxBudget().resolved().max_call_mb


def check_memory_mb(value: int) -> int:
    """A config validator's check of memory_mb (pydantic names the node and field)."""
    ceiling = ceiling_mb()
    if value > ceiling:
        raise ValueError(
            f"memory_mb {value} is above this server's ceiling of {ceiling} MB per sandbox "
            "call (DAGWRIGHT_SANDBOX_MAX_CALL_MB)"
        )
    return value


def waiting(budget: SandboxBudget) -> int:
    """How many calls of this process wait for the budget now."""
    ledger = _ledger(budget.resolved())
    with ledger.changed:
        return ledger.waiting

"""A cgroup per sandbox call, where the host lets this process make one: the kernel then caps
the call's memory (everything it touches: heap, threads' stacks, its scratch tmpfs) and its
tasks (threads and processes), also when the server runs as root, for which RLIMIT_NPROC
does not hold.

cgroup v2 is used when this process's cgroup hands the memory and pids controllers to its
children (a delegated subtree); else cgroup v1, when the memory and pids hierarchies are
mounted and writable (the case on hosts with a hybrid layout run as root). Each call's
cgroup is `dagwright-sandbox-<owner pid>-<n>` below this process's own cgroup; the parent
moves the sandbox's init into it before it runs any code (bwrap waits on its block fd),
reads the peak and whether the OOM killer struck, and removes it when the call ends.
Cgroups left by a killed owner are removed at the next detection (once per process).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "dagwright-sandbox-"
_counter = itertools.count()


@dataclass(frozen=True, slots=True)
class CgroupHost:
    """Where this process makes its calls' cgroups: `version` 2 (one folder) or 1 (memory
    and pids folders)."""

    version: int
    memory: Path
    pids: Path

    def layers(self) -> tuple[str, ...]:
        return (f"cgroup_v{self.version}_memory", f"cgroup_v{self.version}_pids")


@dataclass(slots=True)
class CallCgroup:
    """One call's cgroup (one folder for v2, two for v1)."""

    host: CgroupHost
    name: str
    memory_bytes: int
    max_tasks: int
    # Read by `finish`, after the call.
    peak_bytes: int | None = None
    oom_killed: bool = False

    @property
    def folders(self) -> tuple[Path, ...]:
        if self.host.version == 2:
            return (self.host.memory / self.name,)
        return (self.host.memory / self.name, self.host.pids / self.name)

    def create(self) -> None:
        for folder in self.folders:
            folder.mkdir(mode=0o755)
        mem = self.host.memory / self.name
        pids = self.host.pids / self.name
        if self.host.version == 2:
            _write(mem / "memory.max", str(self.memory_bytes))
            _write_if_there(mem / "memory.swap.max", "0")
            _write(pids / "pids.max", str(self.max_tasks))
        else:
            _write(mem / "memory.limit_in_bytes", str(self.memory_bytes))
            _write_if_there(mem / "memory.memsw.limit_in_bytes", str(self.memory_bytes))
            _write(pids / "pids.max", str(self.max_tasks))

    def add(self, pid: int) -> None:
        """Moves the process (all its threads) in; what it makes later is born inside."""
        for folder in self.folders:
            _write(folder / "cgroup.procs", str(pid))

    def finish(self) -> None:
        """Records the peak and whether the OOM killer struck, then removes the cgroup."""
        name = "memory.peak" if self.host.version == 2 else "memory.max_usage_in_bytes"
        self.peak_bytes = _read_int(self.host.memory / self.name / name)
        self.oom_killed = self._oom_kills()
        self.remove()

    def _oom_kills(self) -> bool:
        name = "memory.events" if self.host.version == 2 else "memory.oom_control"
        try:
            text = (self.host.memory / self.name / name).read_text()
        except OSError:
            return False
        fields = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
        return fields.get("oom_kill", "0") not in ("0", "")

    def remove(self, timeout: float = 5.0) -> None:
        """rmdir succeeds once the last task is gone; the caller waited for the sandbox's
        init already, so this waits only for the kernel to finish reaping."""
        for folder in self.folders:
            _rmdir_when_empty(folder, timeout)


_host: CgroupHost | None = None
_detected = False
_detect_lock = threading.Lock()


def host() -> CgroupHost | None:
    """This process's cgroup place for calls, found (and tried) once; None when the host
    offers none. Sweeps cgroups of dead owners on the way."""
    global _host, _detected  # one answer per process
    with _detect_lock:
        if not _detected:
            _host = _detect()
            _detected = True
            if _host is not None:
                sweep(_host)
        return _host


def new_call(memory_bytes: int, max_tasks: int) -> CallCgroup | None:
    found = host()
    if found is None:
        return None
    name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
    return CallCgroup(found, name, memory_bytes, max_tasks)


def running(owner: int) -> list[CallCgroup]:
    """The call cgroups of one owner process that exist now (tests measure them)."""
    found = host()
    if found is None:
        return []
    calls = []
    for folder in found.memory.glob(f"{PREFIX}{owner}-*"):
        calls.append(CallCgroup(found, folder.name, 0, 0))
    return calls


def usage_bytes(call: CallCgroup) -> int:
    name = "memory.current" if call.host.version == 2 else "memory.usage_in_bytes"
    return _read_int(call.host.memory / call.name / name) or 0


def sweep(found: CgroupHost) -> list[str]:
    """Removes call cgroups whose owner process is gone and that hold no task."""
    removed = []
    for base in {found.memory, found.pids}:
        for folder in base.glob(f"{PREFIX}*"):
            owner = folder.name[len(PREFIX) :].split("-")[0]
            if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
                continue
            with contextlib.suppress(OSError):
                if not (folder / "cgroup.procs").read_text().strip():
                    folder.rmdir()
                    removed.append(str(folder))
    return removed


def _detect() -> CgroupHost | None:
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    candidates: list[CgroupHost] = []
    if "cgroup2" in mounts and "" in own:
        base = mounts["cgroup2"] / own[""].lstrip("/")
        if _delegates(base):
            candidates.append(CgroupHost(2, base, base))
    if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
        candidates.append(
            CgroupHost(
                1,
                mounts["memory"] / own["memory"].lstrip("/"),
                mounts["pids"] / own["pids"].lstrip("/"),
            )
        )
    for candidate in candidates:
        if _works(candidate):
            return candidate
    return None


def _cgroup_mounts() -> dict[str, Path]:
    """Mount points: "cgroup2" for the unified hierarchy, a controller's name for v1's."""
    found: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2":
            found.setdefault("cgroup2", Path(parts[1]))
        elif parts[2] == "cgroup":
            for option in parts[3].split(","):
                if option in ("memory", "pids"):
                    found.setdefault(option, Path(parts[1]))
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and "" for the unified hierarchy."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _delegates(base: Path) -> bool:
    """Whether children of `base` get the memory and pids controllers (asking for them when
    they are available but not yet handed down)."""
    try:
        given = (base / "cgroup.subtree_control").read_text().split()
        if {"memory", "pids"} <= set(given):
            return True
        available = (base / "cgroup.controllers").read_text().split()
        if not {"memory", "pids"} <= set(available):
            return False
        _write(base / "cgroup.subtree_control", "+memory +pids")
        return True
    except OSError:
        return False  # not ours to change, or it holds processes (v2's no-internal rule)


def _works(found: CgroupHost) -> bool:
    """Makes a cgroup with limits and removes it: the only sure test of permissions."""
    trial = CallCgroup(found, f"{PREFIX}{os.getpid()}-probe", 64 * 1024 * 1024, 8)
    try:
        trial.create()
    except OSError as exc:
        log.info("no cgroup v%s for the sandbox: %s", found.version, exc)
        for folder in trial.folders:
            with contextlib.suppress(OSError):
                folder.rmdir()
        return False
    trial.remove()
    return True


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(value)


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        with contextlib.suppress(OSError):
            _write(path, value)


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _rmdir_when_empty(folder: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                log.warning("sandbox cgroup %s still busy; left for the sweep", folder)
                return
            time.sleep(delay)  # the kernel reaps the last tasks: a short, bounded wait
            delay = min(delay * 2, 0.05)

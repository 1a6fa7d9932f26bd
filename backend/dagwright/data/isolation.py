"""Where the Python sandbox runs: bubblewrap's namespaces, or nowhere.

Every call of `dagwright.data.sandbox.run_python` runs its child interpreter under bubblewrap
(`bwrap`): new user, mount, PID, network, IPC, UTS and cgroup namespaces, uid/gid 65534, no
capabilities, no further user namespaces, and a file system built from nothing: the Python
runtime read-only, the call's input folder read-only, a size-limited tmpfs as the only
writable place, a fresh /proc and a minimal /dev. Nothing else of the host exists inside: no
/run, /var/run, /tmp, /dev/shm, home, data directory, nor any Unix socket.

When bwrap is missing or cannot create its namespaces (checked once per process, then
cached), the sandbox refuses to run code with `SandboxError("sandbox_unavailable")`, unless the
operator opts in to the weaker, unisolated child with DAGWRIGHT_SANDBOX_ALLOW_UNISOLATED=1.
DAGWRIGHT_SANDBOX_BWRAP names the bwrap binary (default: `bwrap` on PATH, else /usr/bin/bwrap).
Both are settings (dagwright/settings.py): the composition root gives them to what runs code
as a `SandboxSettings`.
The whole design is described in docs/security/sandbox.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagwright.data import sandbox_cgroup
from dagwright.data.sandbox_budget import SandboxBudget
from dagwright.errors import SandboxError

log = logging.getLogger(__name__)

ENV_BWRAP = "DAGWRIGHT_SANDBOX_BWRAP"
ENV_ALLOW_UNISOLATED = "DAGWRIGHT_SANDBOX_ALLOW_UNISOLATED"

SANDBOX_UID = 65534  # "nobody" inside the user namespace
# Where the child sees its files (inside the mount namespace).
INSIDE = "/sandbox"
INSIDE_CHILD = f"{INSIDE}/_sandbox_child.py"
INSIDE_JOB = f"{INSIDE}/job"
INSIDE_SCRATCH = f"{INSIDE}/scratch"

# The layers bubblewrap adds, outermost first (SandboxResult.isolation lists them).
BWRAP_LAYERS = (
    "bubblewrap",
    "user_namespace",
    "mount_namespace",
    "pid_namespace",
    "network_namespace",
    "ipc_namespace",
    "uts_namespace",
    "cgroup_namespace",
    "scratch_quota",
)

# Top-level links or folders the dynamic loader may need (merged /usr makes them links).
_ROOT_ENTRIES = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """How the sandbox finds bubblewrap, whether code may run without it, and the host's
    budget and cgroups its calls run under."""

    bwrap: str = ""  # empty: `bwrap` on PATH, else /usr/bin/bwrap
    allow_unisolated: bool = False
    # The host-wide share every call takes first (dagwright.data.sandbox_budget).
    budget: SandboxBudget = field(default_factory=SandboxBudget)
    # A cgroup per call where the host offers one (dagwright.data.sandbox_cgroup).
    cgroup: bool = True

    def bwrap_path(self) -> str:
        if self.bwrap:
            return self.bwrap
        return shutil.which("bwrap") or "/usr/bin/bwrap"


@dataclass(frozen=True, slots=True)
class Probe:
    """Whether bubblewrap can make the sandbox on this host, as found by running it once."""

    bwrap: str
    available: bool
    version: str = ""
    problem: str = ""  # why not, in bwrap's or the kernel's words


_probes: dict[tuple[str, int], Probe] = {}
_probe_lock = threading.Lock()


def probe(settings: SandboxSettings) -> Probe:
    """Runs bwrap with the sandbox's real options and a trivial command, once per process
    (per bwrap path and uid); the answer is cached."""
    path = settings.bwrap_path()
    key = (path, os.geteuid())
    with _probe_lock:
        found = _probes.get(key)
        if found is None:
            found = _probes[key] = _run_probe(path)
        return found


def _run_probe(path: str) -> Probe:
    if not os.path.isabs(path) or not os.access(path, os.X_OK):
        return Probe(path, False, problem=f"{path} is not an executable file")
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, env=_bwrap_env()
        ).stdout.strip()
        command = [sys.executable, "-I", "-S", "-c", "pass"]
        argv = bwrap_argv(path, job=None, scratch_bytes=1024 * 1024, fds={}, command=command)
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env=_bwrap_env(), cwd="/"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(path, False, problem=f"{path} could not be run: {exc}")
    if done.returncode != 0:
        detail = (done.stderr.strip() or f"exit code {done.returncode}").splitlines()[-1]
        return Probe(path, False, version, problem=detail)
    return Probe(path, True, version)


def unavailable_error(found: Probe) -> SandboxError:
    return SandboxError(
        f"Python code is not run: the sandbox needs bubblewrap, and {found.problem}. Install "
        "it (Debian/Ubuntu: apt-get install bubblewrap; `make install` does) on a kernel that "
        f"allows unprivileged user namespaces, or point {ENV_BWRAP} at bwrap. An operator "
        f"who accepts running user code without namespaces may set {ENV_ALLOW_UNISOLATED}=1.",
        "sandbox_unavailable",
    )


def describe(settings: SandboxSettings) -> str:
    """One line naming the isolation python_on_tables gets in this process."""
    found = probe(settings)
    if found.available:
        owner = os.geteuid()
        line = (
            f"python sandbox: {found.version or 'bubblewrap'} ({found.bwrap}): user, mount, "
            f"pid, network, ipc, uts, cgroup namespaces; uid {SANDBOX_UID} (host uid {owner}); "
            "read-only Python runtime, tmpfs scratch quota; then rlimits, seccomp, Landlock, "
            "audit hook"
        )
        cgroup = sandbox_cgroup.host() if settings.cgroup else None
        if cgroup is not None:
            line += f"; a cgroup v{cgroup.version} per call (memory.max, pids.max)"
        elif owner == 0:
            line += (
                " (the server runs as root and no cgroup is available: the process count "
                "limit is seccomp's alone, RLIMIT_NPROC does not hold for host root)"
            )
        budget = settings.budget.resolved()
        line += (
            f"; host budget {budget.max_concurrent} calls at once, {budget.memory_mb} MB in "
            f"all, {budget.max_call_mb} MB a call ({budget.folder})"
        )
        return line
    if settings.allow_unisolated:
        return (
            f"python sandbox: UNISOLATED by operator opt-in ({ENV_ALLOW_UNISOLATED}=1; "
            f"bubblewrap unavailable: {found.problem}): user code shares the host's file "
            "system, sockets and processes, kept in only by rlimits, seccomp, Landlock and "
            "the audit hook"
        )
    return (
        f"python sandbox: UNAVAILABLE ({found.problem}): python_on_tables refuses to run code "
        f"(install bubblewrap, or opt in with {ENV_ALLOW_UNISOLATED}=1)"
    )


def log_isolation(settings: SandboxSettings) -> None:
    """The start-up line (a warning so that it shows at the server's default log level),
    after sweeping the call folders of dead servers (dagwright.data.sandbox_scratch)."""
    from dagwright.data.sandbox_scratch import sweep

    sweep()
    log.warning("%s", describe(settings))


# -- the bubblewrap command ---------------------------------------------------------------


def _bwrap_env() -> dict[str, str]:
    """bwrap itself needs nothing of the server's environment."""
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def runtime_paths() -> list[str]:
    """The Python runtime, read-only: /usr (system libraries; Python too, on Debian and in the
    python images), the base installation and the virtual environment. Never a folder that
    holds another (the outer one is bound), never /."""
    candidates = [
        "/usr",
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.prefix,
        sys.exec_prefix,
        os.path.dirname(sys.executable),
        os.path.dirname(os.path.realpath(sys.executable)),  # a venv's python is a link
    ]
    paths = sysconfig.get_paths()
    candidates += [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    # Package folders a .pth file chains in (a worktree's venv over a shared one's packages).
    candidates += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    found: set[str] = set()
    for candidate in candidates:
        for path in {os.path.abspath(candidate), os.path.realpath(candidate)}:
            if path != "/" and os.path.isdir(path):
                found.add(path)
    kept: list[str] = []
    for path in sorted(found):
        if not any(path.startswith(outer.rstrip("/") + "/") for outer in kept):
            kept.append(path)
    return kept


def bwrap_argv(
    bwrap: str,
    *,
    job: Path | None,
    scratch_bytes: int,
    fds: dict[str, int],
    command: Sequence[str],
    environment: dict[str, str] | None = None,
    ro_binds: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The bwrap command line of one sandbox. `fds` may name `info` (bwrap writes the
    sandbox's pid there) and `block` (the sandbox waits for a byte there before the command
    starts). `ro_binds` adds (host path, inside path) pairs, read-only (the chart renderer's
    child script and, where it is installed apart, vl_convert's folder)."""
    argv = [
        bwrap,
        "--unshare-all",  # ipc, pid, net, uts; user and cgroup made mandatory below
        "--unshare-user",
        "--unshare-cgroup",
        "--disable-userns",  # and no user namespace of its own inside
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--cap-drop",
        "ALL",  # bwrap run by root would otherwise hand root's capabilities in
        # Only these, in the innermost user namespace, for the child to mount its scratch
        # folder with a file quota (which bwrap's --tmpfs cannot set) before it drops them
        # all and runs any code of the user's (_sandbox_child.py).
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        # The command is the PID namespace's init: when it ends, the kernel kills and reaps
        # every other process of the namespace before bwrap sees it end.
        "--as-pid-1",
        "--clearenv",
    ]
    for name, value in (environment or {}).items():
        argv += ["--setenv", name, value]
    for path in runtime_paths():
        argv += ["--ro-bind", path, path]
    for entry in _ROOT_ENTRIES:
        if os.path.islink(entry):
            argv += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            argv += ["--ro-bind", entry, entry]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    child = str(Path(__file__).with_name("_sandbox_child.py"))
    argv += ["--ro-bind", child, INSIDE_CHILD]
    if job is not None:
        argv += ["--ro-bind", str(job), INSIDE_JOB]
    for host, inside in ro_binds:
        argv += ["--ro-bind", host, inside]
    argv += ["--size", str(scratch_bytes), "--perms", "0700", "--tmpfs", INSIDE_SCRATCH]
    # bwrap's own tmpfs (/ and /dev, where /dev/shm is) would be writable without limit.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    argv += ["--chdir", INSIDE_SCRATCH]
    if "info" in fds:
        argv += ["--info-fd", str(fds["info"])]
    if "block" in fds:
        argv += ["--block-fd", str(fds["block"])]
    return [*argv, "--", *command]


def read_child_pid(info: bytes) -> int | None:
    """The sandbox's pid (on the host) from what bwrap wrote on --info-fd."""
    try:
        pid = json.loads(info.decode())["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so cut at the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None

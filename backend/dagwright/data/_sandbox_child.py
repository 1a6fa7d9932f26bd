"""The child side of `dagwright.data.sandbox`: run as a script
(`python -I <this file> JOB SCRATCH`), never imported. It reads its job from JOB/job.json,
shuts itself in, loads the input tables from JOB, runs the user's code with SCRATCH as its
current, home and temporary folder, and writes the outcome to the descriptors the parent
handed over (status, result; stdout and stderr are descriptors too).

It imports nothing of dagwright on purpose: the user's code runs in this process, and the less
it finds loaded the less it can reach. Normally it runs under bubblewrap (namespaces, a file
system holding only the Python runtime, JOB read-only and SCRATCH as a size-limited tmpfs; see
`dagwright.data.isolation`), as the init of its PID namespace. Its own layers, outermost first:

- resource limits (CPU seconds, address space, file size, open files, no core dumps; under
  bubblewrap and for a server not running as root, tasks too: RLIMIT_NPROC counts per user
  namespace);
- without bubblewrap only: a network namespace of its own with no interfaces, when permitted;
- Landlock (a Linux security module any process may use on itself): reads only below the
  Python installation, the system libraries, JOB and SCRATCH, writes only in SCRATCH, no
  `execve` at all, no TCP bind/connect, no abstract Unix sockets or signals outside;
- seccomp: no new processes (fork, vfork, clone without CLONE_THREAD, clone3 answered ENOSYS
  so that threads fall back to clone), no namespaces, mounts, ptrace, bpf, io_uring, keyrings,
  userfaultfd or perf events; a system call of another architecture kills the process;
- an audit hook (PEP 578) that refuses the same things at the Python level with a clear
  message, and process creation, sockets and ctypes besides.

The kernel layers are applied while the process is still single-threaded: all are inherited
by threads created later but never imposed on threads that already exist.
"""

from __future__ import annotations

import ctypes
import io
import json
import linecache
import math
import os
import resource
import sys
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

USER_FILE = "<python>"  # the file name tracebacks give the user's code

# System locations that the dynamic loader and the time zone code read; nothing personal.
_SYSTEM_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/null",
    "/dev/urandom",
)

# Audit events refused outright: other processes, the network, raw memory and native calls,
# and walking the object graph (which could reach the hook's own settings).
_REFUSED = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "pty.spawn",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sendto",
        "socket.sendmsg",
        "urllib.Request",
        "webbrowser.open",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "os.chdir",
    }
)
# Audit events whose path arguments (by position) must lie in the readable or writable areas.
_READ_PATHS = {"os.listdir": (0,), "os.scandir": (0,), "glob.glob": (0,)}
_WRITE_PATHS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.rmtree": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_MAX_FILES = 256  # open descriptors


def main() -> None:  # noqa: PLR0915
    job_dir = os.path.realpath(sys.argv[1])
    scratch = os.path.realpath(sys.argv[2])
    # `python -I script` puts the script's folder first on sys.path, which would let the
    # user's code import the data layer's modules by their bare names.
    sys.path = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    with open(os.path.join(job_dir, "job.json"), encoding="utf-8") as handle:
        job = json.load(handle)
    limits = job["limits"]
    status_fd, result_fd = job["fds"]["status"], job["fds"]["result"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    size = limits["memory_mb"] * 1024 * 1024  # a file larger than memory is of no use here
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (_MAX_FILES, _MAX_FILES))
    if job["nproc"]:  # counted in this user namespace: this process, its threads, children
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_tasks"], limits["max_tasks"]))
    isolation = []
    if job["bwrap"] and _mount_scratch(scratch, limits["scratch_mb"], limits["scratch_files"]):
        isolation.append("scratch_file_quota")
    isolation.append("rlimits")
    if not job["bwrap"] and _isolate_network():
        isolation.append("network_namespace")
    if not _drop_capabilities():
        _fail(status_fd, "the sandbox could not drop its capabilities: no code is run")
        return
    read_roots = _read_roots(job_dir, scratch)
    # Opened before Landlock closes /proc: the address-space limit is set after the imports.
    statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    abi = _landlock(scratch, read_roots)
    if job["forbid_new_processes"] and _seccomp():
        isolation.append("seccomp")
    if abi:
        isolation.append(f"landlock_abi_{abi}")
    isolation.append("audit_hook")

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    # Limits count from here: the imports above are the sandbox's cost, not the user's.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(usage.ru_utime + usage.ru_stime) + limits["cpu_s"]
    # As the init of its PID namespace (under bwrap) this process never gets the soft limit's
    # SIGXCPU (the kernel drops default-action signals to an init): the hard limit's SIGKILL
    # is what stops it, so it comes at the same second.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu if job["bwrap"] else cpu + 1))
    memory = _virtual_size(statm) + size
    os.close(statm)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    status: dict[str, Any] = {"isolation": isolation}
    stdout = _CappedWriter(sys.stdout, limits["max_stdout_chars"])
    sys.stdout = sys.stderr = stdout
    try:
        frames = {
            name: pq.read_table(os.path.join(job_dir, file)).to_pandas()
            for name, file in job["tables"].items()
        }
        namespace: dict[str, Any] = {"__name__": "__sandbox__", "pd": pd, "np": np}
        namespace["tables"] = dict(frames)
        for name, frame in frames.items():
            if name.isidentifier() and name not in namespace:
                namespace[name] = frame
        code = job["code"]
        linecache.cache[USER_FILE] = (len(code), None, code.splitlines(True), USER_FILE)
        compiled = compile(code, USER_FILE, "exec")
        sys.addaudithook(_make_hook(scratch, read_roots))
        exec(compiled, namespace)
        status.update(_write_result(namespace.get("result"), result_fd, limits, pd))
        status["ok"] = True
    except MemoryError as error:
        status.update(ok=False, kind="memory", message=_describe(error))
    except BaseException as error:  # everything the user's code raises is reported, exit too
        status.update(ok=False, kind="failed", message=_describe(error))
        status["traceback"] = _user_traceback(error)
    stdout.flush()
    with open(status_fd, "w", encoding="utf-8", closefd=False) as handle:
        json.dump(status, handle)


def _fail(status_fd: int, message: str) -> None:
    """The sandbox itself failed (not the user's code): the parent says it is unavailable."""
    with open(status_fd, "w", encoding="utf-8", closefd=False) as handle:
        json.dump({"ok": False, "kind": "sandbox", "message": message, "isolation": []}, handle)


class _CappedWriter(io.TextIOBase):
    """Passes text through to the real stdout until `limit` characters, then says once how the
    output was cut and drops the rest (a print loop must not fill the disk or the prompt)."""

    def __init__(self, target: Any, limit: int) -> None:
        self.target = target
        self.left = limit
        self.limit = limit
        self.cut = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.left > 0:
            part = text[: self.left]
            self.target.write(part)
            self.left -= len(part)
            if len(part) < len(text):
                self._mark_cut()
        elif text and not self.cut:
            self._mark_cut()
        return len(text)

    def _mark_cut(self) -> None:
        self.cut = True
        self.target.write(f"\n... output cut at {self.limit} characters\n")

    def flush(self) -> None:
        self.target.flush()


def _read_roots(job_dir: str, scratch: str) -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    candidates = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [p for p in sys.path if os.path.isdir(p)]
    candidates += [job_dir, scratch, *_SYSTEM_READ]
    roots = {os.path.realpath(p) for p in candidates if os.path.exists(p)}
    return tuple(sorted(roots))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _make_hook(scratch: str, read_roots: tuple[str, ...]) -> Callable[[str, tuple[Any, ...]], None]:
    write_roots = (scratch, "/dev/null")

    def check(value: Any, roots: tuple[str, ...], what: str) -> None:
        if value is None or isinstance(value, int):
            return  # a descriptor already opened, or the current folder (the scratch folder)
        path = os.path.realpath(os.fsdecode(value))
        if not _inside(path, roots):
            raise PermissionError(f"the sandbox refuses to {what} {path!r}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _REFUSED:
            raise PermissionError(f"the sandbox refuses {event}")
        if event == "open":
            path, mode, flags = args
            writing = bool(flags & _WRITE_FLAGS) or any(c in (mode or "") for c in "wax+")
            if writing:
                check(path, write_roots, "write")
            else:
                check(path, read_roots, "read")
        elif event in _READ_PATHS:
            for index in _READ_PATHS[event]:
                check(args[index], read_roots, "list")
        elif event in _WRITE_PATHS:
            for index in _WRITE_PATHS[event]:
                check(args[index], write_roots, "change")

    return hook


# Flags and commands (linux/sched.h, linux/mount.h, linux/prctl.h, linux/capability.h).
_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522


def _mount_scratch(scratch: str, megabytes: int, files: int) -> bool:
    """Over bwrap's scratch tmpfs (which caps bytes only), one that caps bytes and files:
    each file costs kernel memory that no byte quota counts. bwrap gave this process
    CAP_SYS_ADMIN in its innermost user namespace for this alone: it may not touch bwrap's
    mount namespace, so the mount is made in a new one, where every mount it inherits is
    locked (read-only stays read-only). The capabilities are dropped right after."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    options = f"size={megabytes * 1024 * 1024},nr_inodes={files},mode=0700".encode()
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if libc.mount(b"tmpfs", os.fsencode(scratch), b"tmpfs", flags, options) != 0:
        return False
    os.chdir(scratch)  # the current folder was the covered tmpfs
    return True


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _drop_capabilities() -> bool:
    """No capability left in any set (bounding and ambient included), checked in
    /proc/self/status: False when any remains. Under bwrap only those bwrap granted for the
    scratch mount are there; without bwrap, a server running as root would hand root's."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in range(64):  # those the kernel does not know fail, harmlessly
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    if libc.capset(ctypes.byref(header), ctypes.byref((_CapData * 2)())) != 0:
        return False
    with open("/proc/self/status", encoding="ascii") as handle:
        sets = [line.split()[1] for line in handle if line.startswith("Cap")]
    return len(sets) == 5 and all(int(value, 16) == 0 for value in sets)


def _isolate_network() -> bool:
    """A network namespace of its own: only a loopback that is down, so nothing to connect to.
    Root may create one directly; others only together with a user namespace, if allowed."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) == 0:
        return True
    return bool(libc.unshare(clone_newnet | clone_newuser) == 0)


# seccomp (linux/seccomp.h, linux/filter.h): a classic BPF program over struct seccomp_data
# {int nr; u32 arch; u64 instruction_pointer; u64 args[6]}.
_SECCOMP_ARCH = {
    # machine: (AUDIT_ARCH_*, the refused calls' numbers, clone, clone3, x32 bit or 0)
    "x86_64": (
        0xC000003E,
        {
            "fork": 57,
            "vfork": 58,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "bpf": 321,
            "userfaultfd": 323,
            "perf_event_open": 298,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
        },
        56,
        435,
        0x40000000,
    ),
    "aarch64": (
        0xC00000B7,
        {
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "bpf": 280,
            "userfaultfd": 282,
            "perf_event_open": 241,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
        },
        220,
        435,
        0,
    ),
}
# The same numbers on every architecture: io_uring and the new mount API.
_SECCOMP_COMMON = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}
_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x7E020080  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def _seccomp_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter as (code, jt, jf, k), or None for an architecture without a table here.
    Jumps name labels while the program is built and become offsets at the end."""
    if machine not in _SECCOMP_ARCH:
        return None
    arch, refused, clone, clone3, x32 = _SECCOMP_ARCH[machine]
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    program: list[tuple[Any, Any, Any, int]] = [  # a label: (name, None, None, 0)
        (load, 0, 0, 4),  # arch
        (jeq, "nr", "kill", arch),
        ("nr", None, None, 0),
        (load, 0, 0, 0),  # the call's number
    ]
    if x32:
        program.append((jge, "deny", 0, x32))
    for number in sorted({*refused.values(), *_SECCOMP_COMMON.values()}):
        program.append((jeq, "deny", 0, number))
    program += [
        (jeq, "enosys", 0, clone3),
        (jeq, "clone", 0, clone),
        (ret, 0, 0, _RET_ALLOW),
        ("clone", None, None, 0),
        (load, 0, 0, 16),  # args[0], its low half: the flags
        (jset, "deny", 0, _CLONE_NAMESPACES),
        (jset, "allow", "deny", _CLONE_THREAD),
        ("allow", None, None, 0),
        (ret, 0, 0, _RET_ALLOW),
        ("deny", None, None, 0),
        (ret, 0, 0, _RET_ERRNO | _EPERM),
        ("enosys", None, None, 0),
        (ret, 0, 0, _RET_ERRNO | _ENOSYS),
        ("kill", None, None, 0),
        (ret, 0, 0, _RET_KILL_PROCESS),
    ]
    labels: dict[str, int] = {}
    code: list[tuple[int, Any, Any, int]] = []
    for entry in program:
        if isinstance(entry[0], str):
            labels[entry[0]] = len(code)
        else:
            code.append(entry)

    def offset(target: Any, at: int) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else int(target)

    return [(c, offset(jt, i), offset(jf, i), k) for i, (c, jt, jf, k) in enumerate(code)]


def _seccomp() -> bool:
    """Installs the filter for good (this thread and every later one). False when this
    architecture has no table here or the kernel refuses."""
    program = _seccomp_program(os.uname().machine)
    if program is None:
        return False
    filters = (_SockFilter * len(program))(*[_SockFilter(*entry) for entry in program])
    fprog = _SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        return False
    return bool(libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) == 0)


# Landlock (linux/landlock.h). The syscall numbers are the same on every architecture.
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_LL_FILE_ONLY = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | (1 << 14) | (1 << 15)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _landlock(scratch: str, read_roots: tuple[str, ...]) -> int:
    """Restricts this process (and every thread and child it makes later) for good. Returns
    the Landlock ABI version used, 0 when the kernel has no Landlock."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = int(libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))
    if abi < 1:
        return 0
    handled_fs = _LL_FS_BY_ABI[max(v for v in _LL_FS_BY_ABI if v <= abi)]
    attr = _RulesetAttr(handled_fs, 0, 0)
    size = 8
    if abi >= 4:  # TCP bind and connect: handled, and no rule allows any port
        attr.handled_access_net, size = 3, 16
    if abi >= 6:  # abstract unix sockets and signals outside this sandbox
        attr.scoped, size = 3, 24
    ruleset = int(libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    if ruleset < 0:
        return 0
    try:
        # No execute right anywhere: execve of any file fails in the kernel.
        read = _LL_READ_FILE | _LL_READ_DIR
        for root in read_roots:
            _allow(libc, ruleset, root, read)
        _allow(libc, ruleset, "/dev/null", read | _LL_WRITE_FILE)
        _allow(libc, ruleset, scratch, handled_fs & ~_LL_EXECUTE)
        pr_set_no_new_privs = 38
        if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            return 0
        if libc.syscall(_LL_RESTRICT, ruleset, 0) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            access &= _LL_FILE_ONLY  # directory rights on a file rule are an error
        rule = _PathBeneathAttr(access, fd)
        path_beneath = 1
        libc.syscall(_LL_ADD_RULE, ruleset, path_beneath, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _virtual_size(statm: int) -> int:
    pages = int(os.pread(statm, 200, 0).split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _write_result(value: Any, result_fd: int, limits: dict[str, int], pd: Any) -> dict[str, Any]:
    """Writes the value of `result`: a DataFrame or Series as Parquet (cut to max_output_rows),
    anything else as JSON. Returns what the parent needs to know about it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(value, pd.Series):
        value = value.to_frame(name=value.name if value.name is not None else "value")
    if isinstance(value, pd.DataFrame):
        limit = limits["max_output_rows"]
        truncated = len(value) > limit
        frame = value.head(limit)
        # A meaningful index (after groupby, set_index...) becomes columns; a plain 0..n-1 goes.
        if not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None:
            frame = frame.reset_index()
        frame.columns = [_column_name(c) for c in frame.columns]
        table = pa.Table.from_pandas(frame, preserve_index=False)
        with open(result_fd, "wb", closefd=False) as handle:
            pq.write_table(table.replace_schema_metadata(None), handle)
        return {"result": "table", "truncated": truncated, "rows": len(value)}
    if value is None:
        return {"result": "none", "truncated": False}
    text = json.dumps(_to_json(value, pd), allow_nan=False)
    with open(result_fd, "w", encoding="utf-8", closefd=False) as handle:
        handle.write(text)
    return {"result": "json", "truncated": False}


def _column_name(name: Any) -> str:
    if isinstance(name, tuple):  # MultiIndex columns from agg(...) with several functions
        return "_".join(str(part) for part in name if str(part))
    return str(name)


def _to_json(value: Any, pd: Any) -> Any:
    """A JSON value from what pandas and numpy give: numpy scalars become Python ones, NaN and
    NaT become null, dates become ISO strings."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _to_json(v, pd) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_to_json(v, pd) for v in value]
    if hasattr(value, "tolist") and not hasattr(value, "isoformat"):  # arrays, numpy scalars
        return _to_json(value.tolist(), pd)
    if value is pd.NaT or value is pd.NA:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if type(value).__name__ == "Decimal":
        return float(value)
    raise TypeError(
        "result must be a DataFrame, a Series, or a JSON value (number, string, list, dict); "
        f"got {type(value).__name__}"
    )


def _describe(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()
    message = text[-1] if text else type(error).__name__
    line = _user_line(error)
    return f"{message} (line {line})" if line is not None else message


def _user_line(error: BaseException) -> int | None:
    if isinstance(error, SyntaxError) and error.filename == USER_FILE:
        return error.lineno
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == USER_FILE]
    return frames[-1].lineno if frames else None


def _user_traceback(error: BaseException) -> str:
    """The traceback cut to the frames of the user's code: the sandbox's own frames and those
    deep inside pandas say nothing the user can act on."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == USER_FILE]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines)


if __name__ == "__main__":
    main()

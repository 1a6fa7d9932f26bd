"""The Python sandbox against an attacker (issue 13, findings 1 and 2).

Every case runs hostile code through the real sandbox (`run_python`, and the socket, file and
process cases also through a `python_on_tables` run on a `dagwright serve` process, with the
health probe checking that nobody else waited meanwhile). The code tries each way out it
knows, by the Python API (which the audit hook refuses with a message) and past it: native
code through cffi, libpq through psycopg, `_posixsubprocess.fork_exec` (none raises an audit
event), pyarrow's C++ file system. Each attempt must fail, for a reason that says why: the
hook's message, or the kernel's errno (the path does not exist in the sandbox's mount
namespace, Landlock refuses, seccomp refuses, the tmpfs is full).

Processes: the case is not closed by the attempt failing. Whatever the code started must be
gone when the call returns, which is checked from the host by the sandbox's PID namespace: no
process may be left in it.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dagwright.data.sandbox as sandbox
from dagwright.composition import Composition
from dagwright.data import sandbox_cgroup
from dagwright.data.isolation import (
    ENV_ALLOW_UNISOLATED,
    ENV_BWRAP,
    SandboxSettings,
    describe,
    probe,
)
from dagwright.data.sandbox import SandboxLimits, SandboxResult, run_python
from dagwright.errors import SandboxError
from dagwright.services.secret_store import KEY_FILE
from dagwright.settings import load_settings
from support.probe import health_probe
from support.server import Api, ServerProcess, edge, flow, node

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux only")

POSTGRES_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"  # Debian's default
MARIADB_SOCKET = "/run/mysqld/mysqld.sock"
TABLES = {"t": pa.table({"a": [1, 2, 3]})}

# Helpers the hostile code starts with: `attempt` records each try as refused or not, with the
# reason; `native` is libc through cffi (no audit event); `fork_exec` makes a process whose
# `preexec` runs Python in it and never execs (no audit event either).
PRELUDE = r'''
import os
result = {}

def attempt(name, fn):
    try:
        value = fn()
    except BaseException as error:
        result[name] = {"refused": True, "reason": f"{type(error).__name__}: {error}"}
    else:
        result[name] = {"refused": False, "reason": repr(value)[:500]}

_native = []

def native():
    if not _native:
        from cffi import FFI
        ffi = FFI()
        ffi.cdef("""
            int socket(int, int, int);
            int connect(int, const void *, unsigned int);
            int close(int);
            int fork(void);
            long syscall(long, long, long);
        """)
        _native.extend((ffi, ffi.dlopen(None)))
    return _native

def checked(rc):
    ffi, _ = native()
    if rc < 0:
        code = ffi.errno
        raise OSError(code, os.strerror(code))
    return rc

def unix_connect(path):
    ffi, libc = native()
    fd = checked(libc.socket(1, 1, 0))  # AF_UNIX, SOCK_STREAM
    raw = path.encode() if isinstance(path, str) else path
    address = ffi.new("char[110]")
    address[0:2] = b"\x01\x00"
    address[2:2 + len(raw)] = raw
    length = 2 + len(raw) + (0 if raw.startswith(b"\0") else 1)
    try:
        return checked(libc.connect(fd, address, length))
    finally:
        libc.close(fd)

def tcp_connect(port):
    import struct
    ffi, libc = native()
    fd = checked(libc.socket(2, 1, 0))  # AF_INET, SOCK_STREAM
    address = ffi.new("char[16]")
    address[0:8] = struct.pack("<H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1])
    try:
        return checked(libc.connect(fd, address, 16))
    finally:
        libc.close(fd)

def fork_exec(preexec):
    import _posixsubprocess
    read, write = os.pipe()
    return _posixsubprocess.fork_exec(
        [b"/nonexistent"], [b"/nonexistent"], True, (write,), None, None,
        -1, -1, -1, -1, -1, -1, read, write, False, False, -1, None, None, None, -1,
        preexec, False,
    )

def pid_namespace():
    return os.stat("/proc/self/ns/pid").st_ino
'''


# The operator's default: bubblewrap on PATH, no opt-in to run without it.
ISOLATED = SandboxSettings()


def served() -> SandboxSettings:
    """The sandbox settings a process gets from its environment, through its settings."""
    return Composition(load_settings()).sandbox()


def hostile(body: str) -> str:
    return PRELUDE + body


def outcomes(code: str, limits: SandboxLimits | None = None) -> dict[str, Any]:
    """What the hostile code set as `result`: each attempt's outcome, and facts it found."""
    outcome = run_python(hostile(code), TABLES, limits=limits or SandboxLimits(), settings=ISOLATED)
    assert isinstance(outcome.result, dict), outcome
    return dict(outcome.result)


def assert_refused(found: Mapping[str, Any], expected: Mapping[str, tuple[str, ...]]) -> None:
    """Each attempt was refused, for one of the reasons expected of it (words of the hook's
    message, or the errno of the kernel layer that stops it)."""
    for name, reasons in expected.items():
        attempt = found[name]
        assert attempt["refused"], f"{name} was allowed: {attempt['reason']}"
        assert any(reason in attempt["reason"] for reason in reasons), (name, attempt)


def errno_text(*codes: int) -> tuple[str, ...]:
    return tuple(f"[Errno {code}] {os.strerror(code)}" for code in codes)


def processes_in(namespace: int) -> list[int]:
    """Host pids of the processes in a PID namespace (by its inode)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == f"pid:[{namespace}]":
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[Path]:
    """A Unix socket listening on the host (as Docker's or any daemon's would)."""
    path = tmp_path / "daemon.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.setblocking(False)
    try:
        yield path
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody got through
    finally:
        server.close()


@pytest.fixture
def abstract_socket() -> Iterator[bytes]:
    name = f"\0dagwright-escape-{uuid.uuid4().hex}".encode()
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen()
    server.setblocking(False)
    try:
        yield name
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


# -- the sandbox in force -------------------------------------------------------------------


def test_bubblewrap_is_in_force() -> None:
    """This host has bubblewrap (the Makefile installs it): without it every case below
    would be refused for that reason alone, which proves nothing."""
    found = probe(served())
    assert found.available, found.problem
    assert probe(served()) is found  # probed once per process
    isolation = run_python("result = 1", TABLES, settings=ISOLATED).isolation
    for layer in (
        "bubblewrap",
        "user_namespace",
        "mount_namespace",
        "pid_namespace",
        "network_namespace",
        "ipc_namespace",
        "uts_namespace",
        "cgroup_namespace",
        "scratch_quota",
        "scratch_file_quota",
        "rlimits",
        "seccomp",
        "audit_hook",
    ):
        assert layer in isolation, (layer, isolation)
    assert ("nproc_limit" in isolation) == (os.geteuid() != 0)
    assert describe(served()).startswith("python sandbox: bubblewrap")


def test_the_targets_exist_on_the_host() -> None:
    """The databases' sockets answer on the host, so refusals below are the sandbox's."""
    for path in (POSTGRES_SOCKET, MARIADB_SOCKET):
        if not os.path.exists(path):
            pytest.skip(f"{path} does not exist on this host")
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)


# -- sockets ----------------------------------------------------------------------------------

SOCKETS = r"""
import socket
LOGIN = "dbname=test user=postgres"
def by_socket(path):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
def by_psycopg(conninfo):
    import psycopg
    with psycopg.connect(conninfo, connect_timeout=3) as connection:
        return connection.execute("SELECT pg_read_file('/etc/passwd')").fetchone()
def by_ctypes(path):
    import ctypes
    libc = ctypes.CDLL(None)
    return libc.socket(1, 1, 0)
def by_pymysql():
    import pymysql
    return pymysql.connect(unix_socket=MARIADB, user="root", connect_timeout=3)
def tcp_by_socket(port):
    with socket.socket() as s:
        s.connect(("127.0.0.1", port))

attempt("postgres_socket_module", lambda: by_socket(POSTGRES))
attempt("postgres_psycopg", lambda: by_psycopg(f"host={os.path.dirname(POSTGRES)} {LOGIN}"))
attempt("postgres_ctypes", lambda: by_ctypes(POSTGRES))
attempt("postgres_cffi", lambda: unix_connect(POSTGRES))
attempt("mariadb_socket_module", lambda: by_socket(MARIADB))
attempt("mariadb_pymysql", by_pymysql)
attempt("mariadb_cffi", lambda: unix_connect(MARIADB))
attempt("host_socket_module", lambda: by_socket(HOST_SOCKET))
attempt("host_socket_cffi", lambda: unix_connect(HOST_SOCKET))
attempt("abstract_socket_module", lambda: by_socket(ABSTRACT.decode()))
attempt("abstract_cffi", lambda: unix_connect(ABSTRACT))
attempt("tcp_5432_socket_module", lambda: tcp_by_socket(5432))
attempt("tcp_5432_psycopg", lambda: by_psycopg(f"host=127.0.0.1 port=5432 {LOGIN}"))
attempt("tcp_5432_cffi", lambda: tcp_connect(5432))
attempt("tcp_3306_cffi", lambda: tcp_connect(3306))
"""

HOOK = ("the sandbox refuses socket.connect",)
# Past the hook: the path is not in the sandbox's mount namespace (ENOENT); an abstract name
# lives in the host's network namespace, not the sandbox's (ECONNREFUSED), or Landlock's scope
# refuses it (EPERM); TCP is refused by Landlock (EACCES), else finds nobody listening in the
# empty network namespace (ECONNREFUSED, ENETUNREACH).
ABSENT = errno_text(errno.ENOENT)
TCP = errno_text(errno.EACCES, errno.ECONNREFUSED, errno.ENETUNREACH)
SOCKET_REASONS: dict[str, tuple[str, ...]] = {
    "postgres_socket_module": HOOK,
    "postgres_psycopg": ("No such file or directory",),
    "postgres_ctypes": ("the sandbox refuses ctypes.dlopen",),
    "postgres_cffi": ABSENT,
    "mariadb_socket_module": HOOK,
    "mariadb_pymysql": HOOK,
    "mariadb_cffi": ABSENT,
    "host_socket_module": HOOK,
    "host_socket_cffi": ABSENT,
    "abstract_socket_module": HOOK,
    "abstract_cffi": errno_text(errno.ECONNREFUSED, errno.EPERM),
    "tcp_5432_socket_module": HOOK,
    "tcp_5432_psycopg": ("Permission denied", "Connection refused", "Network is unreachable"),
    "tcp_5432_cffi": TCP,
    "tcp_3306_cffi": TCP,
}


def socket_code(host_socket: Path, abstract: bytes) -> str:
    names = f"POSTGRES = {POSTGRES_SOCKET!r}\nMARIADB = {MARIADB_SOCKET!r}\n"
    names += f"HOST_SOCKET = {str(host_socket)!r}\nABSTRACT = {abstract!r}\n"
    return names + SOCKETS


def test_sockets_are_out_of_reach(host_socket: Path, abstract_socket: bytes) -> None:
    found = outcomes(socket_code(host_socket, abstract_socket))
    assert_refused(found, SOCKET_REASONS)


# -- files --------------------------------------------------------------------------------------

FILES = r"""
import pyarrow.fs as pafs
local = pafs.LocalFileSystem()
def native_read(path):
    with local.open_input_stream(path) as stream:
        return stream.read(4096)
def native_list(path):
    return [info.path for info in local.get_file_info(pafs.FileSelector(path))]
def native_write(path):
    with local.open_output_stream(path) as stream:
        stream.write(b"PAYLOAD-9f41")

for name, path in READS.items():
    attempt(f"read_{name}", lambda path=path: open(path, "rb").read(4096))
    attempt(f"native_read_{name}", lambda path=path: native_read(path))
for name, path in LISTS.items():
    attempt(f"native_list_{name}", lambda path=path: native_list(path))
for name, path in WRITES.items():
    attempt(f"write_{name}", lambda path=path: open(path, "w").write("PAYLOAD-9f41"))
    attempt(f"native_write_{name}", lambda path=path: native_write(path))
"""


def file_code(reads: dict[str, str], lists: dict[str, str], writes: dict[str, str]) -> str:
    return f"READS = {reads!r}\nLISTS = {lists!r}\nWRITES = {writes!r}\n" + FILES


def host_home_file() -> str | None:
    home = Path.home()
    for entry in sorted(home.iterdir()) if home.is_dir() else []:
        if entry.is_file() and os.access(entry, os.R_OK):
            return str(entry)
    return None


def assert_files_refused(
    found: Mapping[str, Any], reads: dict[str, str], writes: dict[str, str]
) -> None:
    # The hook names what it refuses; past it, the host's path is not in the sandbox (ENOENT),
    # Landlock refuses (EACCES), or the sandbox's file system is read-only (EROFS).
    kernel = (
        "No such file or directory",
        "Permission denied",
        "Read-only file system",
    )
    expected: dict[str, tuple[str, ...]] = {}
    for name in reads:
        expected[f"read_{name}"] = ("the sandbox refuses to read",)
        expected[f"native_read_{name}"] = kernel
    for name in writes:
        expected[f"write_{name}"] = ("the sandbox refuses to write",)
        expected[f"native_write_{name}"] = kernel
    assert_refused(found, expected)
    listed = {name: found[name] for name in found if name.startswith("native_list_")}
    assert_refused(listed, {name: kernel for name in listed})
    assert not any(
        "root:x:0:0" in attempt["reason"] or "PAYLOAD-9f41" in attempt["reason"]
        for attempt in found.values()
    )


def test_host_files_are_out_of_reach(tmp_path: Path) -> None:
    marker = Path("/tmp") / f"dagwright-escape-{uuid.uuid4().hex}"
    marker.write_text("host secret")
    data_dir = tmp_path / "data"  # as a server's: its database and its master key
    data_dir.mkdir()
    (data_dir / "dagwright.db").write_text("database")
    (data_dir / KEY_FILE).write_text("master key")
    written = f"/tmp/dagwright-escape-{uuid.uuid4().hex}"
    reads = {
        "passwd": "/etc/passwd",
        "init_environ": "/proc/1/environ",
        "mountinfo": "/proc/self/mountinfo",
        "database": str(data_dir / "dagwright.db"),
        "secret_key": str(data_dir / KEY_FILE),
        "host_tmp": str(marker),
    }
    home_file = host_home_file()
    if home_file is not None:
        reads["home"] = home_file
    lists = {"tmp": "/tmp", "home": str(Path.home()), "run": "/run", "dev_shm": "/dev/shm"}
    writes = {
        "tmp": written,
        "dev_shm": "/dev/shm/escaped",
        "root": "/escaped",
        "usr": "/usr/lib/escaped",
        "job": "/sandbox/job/escaped",
    }
    try:
        found = outcomes(file_code(reads, lists, writes))
        assert_files_refused(found, reads, writes)
        assert "host secret" not in str(found)
        assert not Path(written).exists()
        assert not Path("/escaped").exists()
        assert not Path("/dev/shm/escaped").exists()
    finally:
        marker.unlink()


def test_scratch_is_writable_up_to_its_quota() -> None:
    code = r"""
def fill(megabytes):
    with open("big", "wb") as handle:
        for _ in range(megabytes):
            handle.write(b"x" * (1 << 20))
attempt("small", lambda: open("small", "w").write("fits"))
attempt("fill", lambda: fill(64))
attempt("fill_tmp", lambda: open(os.environ["TMPDIR"] + "/more", "wb").write(b"x" * (1 << 20)))
os.remove("big")
def many(count):
    for n in range(count):
        open(f"empty{n}", "w").close()
attempt("many_files", lambda: many(1000))
"""
    found = outcomes(code, SandboxLimits(scratch_mb=16, scratch_files=200))
    assert not found["small"]["refused"], found["small"]
    full = errno_text(errno.ENOSPC)
    assert_refused(found, {"fill": full, "fill_tmp": full, "many_files": full})


PRIVILEGES = r"""
from cffi import FFI
ffi = FFI()
ffi.cdef(
    "int capget(void *, void *);"
    "int prctl(int, unsigned long, unsigned long, unsigned long, unsigned long);"
    "int mount(const char *, const char *, const char *, unsigned long, const void *);"
    "int umount2(const char *, int);"
    "int unshare(int);"
)
libc = ffi.dlopen(None)
def capabilities():
    header = ffi.new("unsigned int[2]", [0x20080522, 0])
    data = ffi.new("unsigned int[6]")
    if libc.capget(header, data) != 0:
        raise OSError(ffi.errno, "capget")
    bounding = [cap for cap in range(41) if libc.prctl(23, cap, 0, 0, 0) == 1]
    ambient = [cap for cap in range(41) if libc.prctl(47, 1, cap, 0, 0) == 1]
    return {"sets": list(data), "bounding": bounding, "ambient": ambient}
def call(rc):
    if rc < 0:
        raise OSError(ffi.errno, os.strerror(ffi.errno))
    return rc
result["capabilities"] = capabilities()
MS_REMOUNT, MS_BIND = 32, 4096
attempt("remount_usr_writable",
        lambda: call(libc.mount(ffi.NULL, b"/usr", ffi.NULL, MS_REMOUNT | MS_BIND, ffi.NULL)))
attempt("unmount_scratch", lambda: call(libc.umount2(os.getcwd().encode(), 2)))
attempt("unshare_user", lambda: call(libc.unshare(0x10000000)))
attempt("unshare_mount", lambda: call(libc.unshare(0x00020000)))
"""
NO_CAPABILITIES = {"sets": [0] * 6, "bounding": [], "ambient": []}


def test_no_privileges_left() -> None:
    """The child held CAP_SYS_ADMIN in its innermost user namespace to mount its scratch
    folder: nothing of it is left when the user's code runs, and seccomp refuses mounts and
    namespaces besides."""
    found = outcomes(PRIVILEGES)
    assert found["capabilities"] == NO_CAPABILITIES
    refused = ("remount_usr_writable", "unmount_scratch", "unshare_user", "unshare_mount")
    assert_refused(found, dict.fromkeys(refused, errno_text(errno.EPERM)))


# -- processes ----------------------------------------------------------------------------------

PROCESSES = r"""
import threading
def python_fork():
    while True:
        os.fork()
def by_subprocess():
    import subprocess
    return subprocess.run(["true"])
def by_ctypes():
    import ctypes
    return ctypes.CDLL(None).fork()
def by_cffi():
    ffi, libc = native()
    return checked(libc.fork())
def raw_fork():
    ffi, libc = native()
    return checked(libc.syscall(57 if os.uname().machine == "x86_64" else 220, 17, 0))
def raw_clone3():
    ffi, libc = native()
    return checked(libc.syscall(435, 0, 0))
def sleeper():
    import time
    while True:
        time.sleep(0.05)
def bomb():
    while True:
        fork_exec(sleeper)
def threads():
    started = [threading.Thread(target=sum, args=([1],)) for _ in range(8)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return len(started)

attempt("os_fork", python_fork)
attempt("subprocess", by_subprocess)
attempt("fork_exec", bomb)
attempt("ctypes_fork", by_ctypes)
attempt("cffi_fork", by_cffi)
attempt("raw_fork", raw_fork)
attempt("raw_clone3", raw_clone3)
attempt("threads", threads)
result["pid_namespace"] = pid_namespace()
"""
SECCOMP = errno_text(errno.EPERM)
PROCESS_REASONS: dict[str, tuple[str, ...]] = {
    "os_fork": ("the sandbox refuses os.fork",),
    "subprocess": ("the sandbox refuses subprocess.Popen",),
    "fork_exec": SECCOMP,
    "ctypes_fork": ("the sandbox refuses ctypes.dlopen",),
    "cffi_fork": SECCOMP,
    "raw_fork": SECCOMP,
    "raw_clone3": errno_text(errno.ENOSYS),  # so that glibc's threads fall back to clone
}


def test_no_new_processes() -> None:
    found = outcomes(PROCESSES)
    assert_refused(found, PROCESS_REASONS)
    assert found["threads"] == {"refused": False, "reason": "8"}  # pandas needs threads
    assert processes_in(found["pid_namespace"]) == []


DAEMON = r"""
import time
def daemon():
    os.setsid()
    with open("daemon.pid", "w") as handle:
        handle.write(str(os.getpid()))
    while True:
        time.sleep(0.05)
def middle():
    os.setsid()
    fork_exec(daemon)

result["pid_namespace"] = pid_namespace()
print("namespace", result["pid_namespace"], flush=True)
attempt("daemon", lambda: fork_exec(middle))
for _ in range(200):
    if os.path.exists("daemon.pid"):
        pid = int(open("daemon.pid").read() or 0)
        result["daemon_alive"] = pid > 0 and os.path.exists(f"/proc/{pid}")
        break
    time.sleep(0.05)
else:
    result["daemon_alive"] = False
"""


def test_double_forked_daemon_is_refused() -> None:
    found = outcomes(DAEMON)
    assert_refused(found, {"daemon": SECCOMP})
    assert found["daemon_alive"] is False
    assert processes_in(found["pid_namespace"]) == []


@pytest.fixture
def processes_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the seccomp layer, to show what the PID namespace does on its own."""
    monkeypatch.setattr(sandbox, "_FORBID_NEW_PROCESSES", False)


@pytest.mark.usefixtures("processes_allowed")
def test_pid_namespace_ends_a_daemon_when_the_call_returns() -> None:
    outcome = run_python(hostile(DAEMON), TABLES, settings=ISOLATED)
    assert "seccomp" not in outcome.isolation
    found = outcome.result
    assert isinstance(found, dict)
    assert isinstance(found["pid_namespace"], int)
    # The daemon did start (the middle process's exec failed: Landlock allows no execve)...
    assert found["daemon_alive"] is True, found
    # ...and is gone once the call has returned, with every other process of the namespace.
    assert processes_in(found["pid_namespace"]) == []


@pytest.mark.usefixtures("processes_allowed")
def test_pid_namespace_ends_a_daemon_when_the_wall_clock_kills() -> None:
    code = DAEMON + "\nwhile True:\n    time.sleep(1)\n"
    with pytest.raises(SandboxError) as caught:
        run_python(hostile(code), TABLES, limits=SandboxLimits(wall_s=10), settings=ISOLATED)
    assert caught.value.code == "python_timeout"
    assert "wall-clock" in caught.value.message
    assert caught.value.stdout.startswith("namespace "), "killed before the code started"
    namespace = int(caught.value.stdout.split()[1])
    assert processes_in(namespace) == []


@pytest.mark.usefixtures("processes_allowed")
def test_fork_bomb_without_seccomp_is_bounded_and_ended() -> None:
    """RLIMIT_NPROC counts the tasks of the sandbox's user namespace (not for a server that
    runs as root: the kernel exempts host root), the call's cgroup (pids.max) for root too;
    the PID namespace ends them all."""
    code = (
        PROCESSES.split("attempt(")[0]
        + r"""
created = []
def bomb(limit):
    while len(created) < limit:
        created.append(fork_exec(sleeper))
attempt("bomb", lambda: bomb(LIMIT))
result["created"] = len(created)
result["pid_namespace"] = pid_namespace()
"""
    )
    # As root, only a cgroup's pids.max bounds them (dagwright.data.sandbox_cgroup).
    unbounded = os.geteuid() == 0 and sandbox_cgroup.host() is None
    limits = SandboxLimits(max_tasks=32)
    found = outcomes(f"LIMIT = {40 if unbounded else 1000}\n" + code, limits)
    if unbounded:
        assert found["created"] == 40  # nothing but memory and the pid namespace bounds them
    else:
        assert_refused(found, {"bomb": errno_text(errno.EAGAIN)})
        assert found["created"] < limits.max_tasks
    assert processes_in(found["pid_namespace"]) == []


# -- memory and time --------------------------------------------------------------------------


def test_memory_bomb_is_stopped() -> None:
    with pytest.raises(SandboxError) as caught:
        run_python(
            "chunks = []\nwhile True: chunks.append(bytearray(10**8))",
            TABLES,
            limits=SandboxLimits(memory_mb=256),
            settings=ISOLATED,
        )
    assert caught.value.code == "python_memory"
    assert "256 MB" in caught.value.message


def test_cpu_loop_is_stopped() -> None:
    started = time.monotonic()
    with pytest.raises(SandboxError) as caught:
        run_python("while True: pass", TABLES, limits=SandboxLimits(cpu_s=1), settings=ISOLATED)
    assert caught.value.code == "python_timeout"
    assert "CPU time limit of 1 s" in caught.value.message
    assert time.monotonic() - started < 30


# -- without bubblewrap -----------------------------------------------------------------------


def test_without_bubblewrap_nothing_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = SandboxSettings(bwrap=str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxError) as caught:
        run_python("result = 1", TABLES, settings=missing)
    error = caught.value
    assert error.code == "sandbox_unavailable"
    assert "not an executable file" in error.message
    assert "apt-get install bubblewrap" in error.message
    assert f"{ENV_ALLOW_UNISOLATED}=1" in error.message
    # The same through the environment, as the server reads it (its settings).
    monkeypatch.setenv(ENV_BWRAP, str(tmp_path / "no-bwrap"))
    with pytest.raises(SandboxError, match="bubblewrap") as caught:
        run_python("result = 1", TABLES, settings=served())
    assert caught.value.code == "sandbox_unavailable"
    assert describe(served()).startswith("python sandbox: UNAVAILABLE")


def test_without_namespaces_nothing_runs(tmp_path: Path) -> None:
    """A bwrap that cannot make its namespaces (as on a kernel or a container that forbids
    unprivileged user namespaces): bwrap's own words reach the caller."""
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with pytest.raises(SandboxError) as caught:
        run_python("result = 1", TABLES, settings=SandboxSettings(bwrap=str(fake)))
    assert caught.value.code == "sandbox_unavailable"
    assert "No permissions to creating new namespace" in caught.value.message


def test_operator_may_opt_in_to_run_unisolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_BWRAP, str(tmp_path / "no-bwrap"))
    monkeypatch.setenv(ENV_ALLOW_UNISOLATED, "1")
    opted_in = served()
    outcome: SandboxResult = run_python(hostile(PROCESSES), TABLES, settings=opted_in)
    assert "bubblewrap" not in outcome.isolation
    assert outcome.isolation[:2] == ("host_budget", "rlimits")
    assert "seccomp" in outcome.isolation  # the child's own layers still hold
    assert isinstance(outcome.result, dict)
    assert_refused(outcome.result, PROCESS_REASONS)
    assert describe(opted_in).startswith("python sandbox: UNISOLATED")
    privileges = run_python(hostile(PRIVILEGES), TABLES, settings=opted_in).result
    assert isinstance(privileges, dict)
    assert privileges["capabilities"] == NO_CAPABILITIES  # a root server's child is not root


# -- through a server -------------------------------------------------------------------------


def python_flow(code: str) -> dict[str, Any]:
    return flow(
        [
            node("tables", "json_input", name="tables"),
            node("py", "python_on_tables", code=code),
            node("out", "output", name="result"),
        ],
        [edge("tables", "py.tables"), edge("py.result", "out")],
        name="hostile",
    )


def run_on_server(server: ServerProcess, api: Api, code: str) -> dict[str, Any]:
    """Publishes the code as a python_on_tables app and runs it while the health probe runs."""
    slug = f"hostile-{uuid.uuid4().hex[:8]}"
    key = api.published_app(slug, python_flow(code))
    with health_probe(server.base_url):
        response = api.run(slug, key, {"tables": {"t": [{"a": 1}]}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, dict)
    return body


def test_server_logs_the_isolation(server_process: ServerProcess) -> None:
    assert "python sandbox: bubblewrap" in server_process.output()


def test_server_sockets_are_out_of_reach(
    server_process: ServerProcess, api: Api, host_socket: Path, abstract_socket: bytes
) -> None:
    body = run_on_server(server_process, api, hostile(socket_code(host_socket, abstract_socket)))
    assert body["status"] == "succeeded", body
    assert_refused(body["outputs"]["result"], SOCKET_REASONS)


def test_server_refusal_fails_the_run_with_the_reason(
    server_process: ServerProcess, api: Api
) -> None:
    code = hostile(f"checked(unix_connect({POSTGRES_SOCKET!r}))")
    body = run_on_server(server_process, api, code)
    assert body["status"] == "failed", body
    assert body["error"]["code"] == "python_failed"
    assert "No such file or directory" in body["error"]["message"]


def test_server_data_directory_is_out_of_reach(server_process: ServerProcess, api: Api) -> None:
    data_dir = server_process.data_dir.resolve()
    assert (data_dir / "dagwright.db").exists()
    reads = {"database": str(data_dir / "dagwright.db"), "passwd": "/etc/passwd"}
    if (data_dir / KEY_FILE).exists():
        reads["secret_key"] = str(data_dir / KEY_FILE)
    writes = {"data_dir": str(data_dir / "escaped")}
    body = run_on_server(
        server_process, api, hostile(file_code(reads, {"data_dir": str(data_dir)}, writes))
    )
    assert body["status"] == "succeeded", body
    assert_files_refused(body["outputs"]["result"], reads, writes)
    assert not (data_dir / "escaped").exists()


def test_server_processes_end_with_the_call(server_process: ServerProcess, api: Api) -> None:
    body = run_on_server(server_process, api, hostile(PROCESSES + DAEMON))
    assert body["status"] == "succeeded", body
    found = body["outputs"]["result"]
    assert_refused(found, {**PROCESS_REASONS, "daemon": SECCOMP})
    assert found["daemon_alive"] is False
    assert processes_in(found["pid_namespace"]) == []

"""The Python sandbox: results, errors with the user's line numbers, limits, and isolation."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dagwright.data.isolation import SandboxSettings
from dagwright.data.sandbox import SandboxLimits, SandboxResult, run_python
from dagwright.errors import SandboxError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux only")

EMPLOYEES = pa.table(
    {"name": ["Lucy", "Tom", "Ann"], "depno": [1, 2, 1], "bonus": [2100.0, 1569.0, 900.0]}
)


def run(code: str, limits: SandboxLimits | None = None) -> SandboxResult:
    limits = limits or SandboxLimits()
    return run_python(code, {"employee": EMPLOYEES}, limits=limits, settings=SandboxSettings())


def failure(code: str, limits: SandboxLimits | None = None) -> SandboxError:
    with pytest.raises(SandboxError) as caught:
        run(code, limits)
    return caught.value


def test_groupby_result_and_stdout() -> None:
    outcome = run("print('rows:', len(employee))\nresult = employee.groupby('depno').bonus.sum()")
    assert outcome.stdout == "rows: 3\n"
    assert isinstance(outcome.result, pa.Table)
    assert outcome.result.to_pydict() == {"depno": [1, 2], "bonus": [3000.0, 1569.0]}
    assert not outcome.truncated
    assert outcome.duration_s > 0


def test_json_results_and_tables_dict() -> None:
    code = "result = {'names': sorted(tables), 'total': employee.bonus.sum(), 'gap': float('nan')}"
    assert run(code).result == {"names": ["employee"], "total": 4569.0, "gap": None}
    assert run("x = 1").result is None


def test_rows_cut_to_the_limit() -> None:
    outcome = run("result = pd.DataFrame({'n': range(50)})", SandboxLimits(max_output_rows=10))
    assert isinstance(outcome.result, pa.Table)
    assert outcome.result.num_rows == 10
    assert outcome.truncated


def test_stdout_cut_to_the_limit() -> None:
    outcome = run("for i in range(1000): print('x' * 10)", SandboxLimits(max_stdout_chars=100))
    assert outcome.stdout.startswith("x" * 10)
    assert "output cut at 100 characters" in outcome.stdout
    assert len(outcome.stdout) < 200


def test_syntax_error_names_the_line() -> None:
    error = failure("x = 1\ny = (\n")
    assert error.code == "python_failed"
    assert "line 2" in error.message
    assert error.traceback is not None
    assert 'File "<python>", line 2' in error.traceback


def test_traceback_shows_only_user_frames() -> None:
    error = failure("print('before')\nx = 1\nresult = employee['salary']")
    assert error.code == "python_failed"
    assert error.message == "KeyError: 'salary' (line 3)"
    assert error.traceback is not None
    assert 'File "<python>", line 3, in <module>' in error.traceback
    assert "pandas" not in error.traceback
    assert "_sandbox_child" not in error.traceback
    assert error.stdout == "before\n"


def test_cpu_loop_times_out() -> None:
    started = time.monotonic()
    error = failure("while True: pass", SandboxLimits(cpu_s=1))
    assert error.code == "python_timeout"
    assert "CPU" in error.message
    assert time.monotonic() - started < 10


def test_sleep_hits_the_wall_clock() -> None:
    started = time.monotonic()
    error = failure(
        # The wall clock also counts the child's pandas import (~0.5 s, seconds on a loaded
        # machine): 4 s leaves the print room to happen first.
        "import time\nprint('waiting', flush=True)\ntime.sleep(60)",
        SandboxLimits(wall_s=4),
    )
    assert error.code == "python_timeout"
    assert "wall-clock" in error.message
    assert error.stdout == "waiting\n"
    assert time.monotonic() - started < 8


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(20 * 1024**3)",
        "x = np.ones(20 * 1024**3 // 8)",
        "chunks = []\nwhile True: chunks.append(bytearray(10**8))",
    ],
)
def test_memory_limit(code: str) -> None:
    error = failure(code, SandboxLimits(memory_mb=512))
    assert error.code == "python_memory"
    assert "512 MB" in error.message


# Each attempt must fail with PermissionError naming what was refused. They run in one child
# (each child costs about a second of pandas import).
ATTEMPTS = {
    "connect": "import socket\nsocket.socket().connect(('127.0.0.1', 5432))",
    "resolve": "import socket\nsocket.create_connection(('localhost', 5432), timeout=2)",
    "read": "open('/etc/passwd').read()",
    "read_csv": "pd.read_csv('/etc/passwd')",
    "write": "open('/tmp/x', 'w').write('leak')",
    "system": "import os\nos.system('true')",
    "subprocess": "import subprocess\nsubprocess.run(['true'])",
    "listdir": "import os\nos.listdir('/')",
    "ctypes": "import ctypes\nctypes.CDLL(None)",
    "fork": "import os\nos.fork()",
}
REFUSED = {
    "connect": "socket.connect",
    "resolve": "socket.getaddrinfo",
    "read": "/etc/passwd",
    "read_csv": "/etc/passwd",
    "write": "/tmp/x",
    "system": "os.system",
    "subprocess": "subprocess.Popen",
    "listdir": "'/'",
    "ctypes": "ctypes.dlopen",
    "fork": "os.fork",
}


def test_refused() -> None:
    code = "result = {}\n"
    for name, attempt in ATTEMPTS.items():
        code += f"try:\n    exec({attempt!r})\n    result[{name!r}] = 'allowed'\n"
        code += f"except Exception as error:\n    result[{name!r}] = repr(error)\n"
    outcome = run(code)
    assert isinstance(outcome.result, dict)
    for name, refused in REFUSED.items():
        message = str(outcome.result[name])
        assert "PermissionError" in message, name
        assert refused in message, name


def test_refusal_reaches_the_user_as_a_failure() -> None:
    error = failure("x = 1\nopen('/etc/passwd').read()")
    assert error.code == "python_failed"
    assert error.message == "PermissionError: the sandbox refuses to read '/etc/passwd' (line 2)"


def test_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGWRIGHT_SECRET_KEY", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    environment = run("import os\nresult = dict(os.environ)").result
    assert isinstance(environment, dict)
    assert not any(name.startswith("DAGWRIGHT") for name in environment)
    assert "OPENAI_API_KEY" not in environment
    assert "s3cret" not in str(environment)


@pytest.fixture(scope="module")
def isolation() -> tuple[str, ...]:
    return run("result = 1").isolation


def test_layers_in_effect(isolation: tuple[str, ...]) -> None:
    assert "rlimits" in isolation
    assert "audit_hook" in isolation
    if os.geteuid() == 0:  # root may always make a network namespace
        assert "network_namespace" in isolation


def test_kernel_layers_hold_without_the_audit_hook(
    isolation: tuple[str, ...], tmp_path: Path
) -> None:
    """pyarrow opens files in C++, past the audit hook. A file of the host is not in the
    sandbox's mount namespace at all; what is there but outside Landlock's paths (/proc, /)
    Landlock refuses."""
    if not any(layer.startswith("landlock") for layer in isolation):
        pytest.skip("Landlock is not available on this kernel")
    secret = tmp_path / "parent.csv"
    secret.write_text("a\n1\n")
    error = failure(f"import pyarrow.csv\nresult = pyarrow.csv.read_csv({str(secret)!r})")
    absent = "bubblewrap" in isolation
    assert ("No such file or directory" if absent else "Permission denied") in error.message
    inside = "import pyarrow.csv\nresult = pyarrow.csv.read_csv('/proc/self/status')"
    assert "Permission denied" in failure(inside).message
    listing = "import pyarrow.fs as fs\nfs.LocalFileSystem().get_file_info(fs.FileSelector('/'))"
    assert "Permission denied" in failure(listing).message

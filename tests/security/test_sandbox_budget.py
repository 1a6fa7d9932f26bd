"""Attacks on the sandboxes taken together (issue 29, item 7): many calls at once, each asking
for much memory, a thread bomb by a server running as root, and the folders a killed server
leaves behind. Each runs real sandboxes (bubblewrap, the host's cgroups where it offers them)
against a budget folder of the test's own, so that other processes' sandboxes on the host
neither disturb the figures nor are disturbed; the served cases run a real `dagwright serve`
under the health probe.

Figures on the development host (2 cores, 24 GB, root, cgroup v1): before, 4 concurrent
calls of 250 MB each ran at once (1,223 MB together in their cgroups; 4 x 900 MB: 3,829 MB)
and 3,000 threads started in one call; after, at most the budget's 2 calls run at once
(their summed cgroup usage stays under the budget: 612 MB), the others wait or get
`sandbox_busy` (429 with Retry-After), and the thread bomb stops at the call's pids.max
(64 tasks: 60 threads).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from dagwright.data import sandbox_budget, sandbox_cgroup, sandbox_scratch
from dagwright.data.isolation import SandboxSettings, probe
from dagwright.data.sandbox import SandboxLimits, SandboxResult, run_python
from dagwright.data.sandbox_budget import SandboxBudget
from dagwright.errors import SandboxBusyError, SandboxError
from support.probe import health_probe
from support.server import Api, ServerProcess, edge, flow, node

TABLES = {"t": pa.table({"a": [1, 2, 3]})}
ALLOCATE_MB = 250
# Holds the memory for a while, so that calls that are let in together overlap.
HOG = f"""
import time
block = bytearray({ALLOCATE_MB} * 1024 * 1024)
block[::4096] = b"x" * len(block[::4096])  # touched: resident, not only reserved
time.sleep(1.5)
result = len(block)
"""
HOG_LIMITS = SandboxLimits(memory_mb=ALLOCATE_MB + 60, scratch_mb=16)
HOG_CHARGE = sandbox_budget.charge_mb(HOG_LIMITS.memory_mb, HOG_LIMITS.scratch_mb)


@pytest.fixture(autouse=True)
def bubblewrap() -> None:
    found = probe(SandboxSettings())
    assert found.available, f"this host needs bubblewrap for these attacks: {found.problem}"


def settings_with(folder: Path, **budget: Any) -> SandboxSettings:
    return SandboxSettings(budget=SandboxBudget(folder=str(folder), **budget))


def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


class Calls:
    """Sandbox calls on threads of their own, each one's result or error kept."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.outcomes: list[SandboxResult | SandboxError] = []
        self.lock = threading.Lock()

    def start(self, code: str, limits: SandboxLimits, settings: SandboxSettings) -> None:
        def call() -> None:
            outcome: SandboxResult | SandboxError
            try:
                outcome = run_python(code, TABLES, limits=limits, settings=settings)
            except SandboxError as exc:
                outcome = exc
            with self.lock:
                self.outcomes.append(outcome)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        self.threads.append(thread)

    def join(self) -> list[SandboxResult | SandboxError]:
        for thread in self.threads:
            thread.join(120)
            assert not thread.is_alive()
        return self.outcomes


class Meter:
    """Samples, every 10 ms, the slots held and the summed memory usage of this process's
    sandbox cgroups: the figures the budget must keep under."""

    def __init__(self, budget: SandboxBudget) -> None:
        self.budget = budget
        self.most_slots = 0
        self.most_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.most_slots = max(self.most_slots, sandbox_budget.in_use(self.budget))
            used = sum(sandbox_cgroup.usage_bytes(c) for c in sandbox_cgroup.running(os.getpid()))
            self.most_bytes = max(self.most_bytes, used)
            self._stop.wait(0.01)

    def __enter__(self) -> Meter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


# -- memory and concurrency taken together ---------------------------------------------------


def test_concurrent_memory_calls_stay_within_the_budget(tmp_path: Path) -> None:
    """4 calls of 250 MB at once against a budget of two such calls: two run, two wait, all
    four succeed, and the calls' cgroups never held more than the budget together."""
    budget_mb = 2 * HOG_CHARGE
    settings = settings_with(tmp_path, max_concurrent=4, memory_mb=budget_mb, queue_wait_s=60)
    calls = Calls()
    with Meter(settings.budget) as meter:
        for _ in range(4):
            calls.start(HOG, HOG_LIMITS, settings)
        outcomes = calls.join()
    assert all(isinstance(o, SandboxResult) for o in outcomes), outcomes
    assert meter.most_slots == 2  # the memory budget, not the 4 slots, held them back
    if sandbox_cgroup.host() is not None:
        most_mb = meter.most_bytes / 2**20
        assert ALLOCATE_MB < most_mb <= budget_mb, most_mb
        print(f"4 x {ALLOCATE_MB} MB: at most {most_mb:.0f} MB at once (budget {budget_mb})")


def test_without_a_tight_budget_the_same_calls_overlap(tmp_path: Path) -> None:
    """The figure the budget prevents, measured the same way (so the meter can fail)."""
    settings = settings_with(tmp_path, max_concurrent=4, memory_mb=8 * HOG_CHARGE)
    calls = Calls()
    with Meter(settings.budget) as meter:
        for _ in range(4):
            calls.start(HOG, HOG_LIMITS, settings)
        outcomes = calls.join()
    assert all(isinstance(o, SandboxResult) for o in outcomes), outcomes
    assert meter.most_slots >= 3
    if sandbox_cgroup.host() is not None:
        assert meter.most_bytes / 2**20 > 2 * HOG_CHARGE
        print(f"4 x {ALLOCATE_MB} MB unbounded: {meter.most_bytes / 2**20:.0f} MB at once")


def test_calls_beyond_the_slots_wait_then_run_or_are_refused(tmp_path: Path) -> None:
    """N+k calls: the first waits in the queue and runs once a slot frees; the second finds
    the queue full and gets sandbox_busy at once, with a Retry-After."""
    settings = settings_with(tmp_path, max_concurrent=2, queue_max=1, queue_wait_s=60)
    holders = Calls()
    for _ in range(2):
        holders.start("import time\ntime.sleep(2)\nresult = 1", SandboxLimits(), settings)
    until(lambda: sandbox_budget.in_use(settings.budget) == 2)
    waiter = Calls()
    waiter.start("result = 'waited'", SandboxLimits(), settings)
    until(lambda: sandbox_budget.waiting(settings.budget) == 1)
    started = time.monotonic()
    with pytest.raises(SandboxBusyError) as refused:
        run_python("result = 1", TABLES, settings=settings)
    assert time.monotonic() - started < 1.0  # refused, not queued
    assert refused.value.code == "sandbox_busy"
    assert refused.value.retry_after >= 1
    assert "calls wait already" in refused.value.message
    (waited,) = waiter.join()
    assert isinstance(waited, SandboxResult)
    assert waited.result == "waited"
    assert all(isinstance(o, SandboxResult) for o in holders.join())


def test_a_call_waits_only_a_bounded_time(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, max_concurrent=1, queue_wait_s=0.5)
    holder = Calls()
    holder.start("import time\ntime.sleep(3)\nresult = 1", SandboxLimits(), settings)
    until(lambda: sandbox_budget.in_use(settings.budget) == 1)
    started = time.monotonic()
    with pytest.raises(SandboxBusyError) as refused:
        run_python("result = 1", TABLES, settings=settings)
    assert 0.5 <= time.monotonic() - started < 2.5
    assert "after waiting 0.5 s" in refused.value.message
    holder.join()


def test_the_budget_holds_across_processes(tmp_path: Path) -> None:
    """Another process (a second worker of the host) holding the only slot keeps this one's
    calls out; its death (kill -9) frees the slot with no clean-up."""
    budget = SandboxBudget(folder=str(tmp_path), max_concurrent=1, queue_wait_s=0.3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from dagwright.data.sandbox_budget import SandboxBudget, share\n"
            f"with share(SandboxBudget(folder={str(tmp_path)!r}, max_concurrent=1), 64, 16):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SandboxBusyError):
            run_python("result = 1", TABLES, settings=SandboxSettings(budget=budget))
    finally:
        holder.kill()
        holder.wait()
    assert run_python("result = 2", TABLES, settings=SandboxSettings(budget=budget)).result == 2


def test_memory_above_the_ceiling_is_refused_before_running(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, max_call_mb=1024)
    with pytest.raises(SandboxError) as refused:
        run_python("result = 1", TABLES, limits=SandboxLimits(memory_mb=16384), settings=settings)
    assert refused.value.code == "sandbox_limit"
    assert "memory_mb 16384" in refused.value.message
    assert "1024 MB" in refused.value.message
    assert list(tmp_path.glob("slot-*")) == []  # refused before it took anything


# -- threads of a server running as root -----------------------------------------------------


def test_thread_bomb_is_stopped() -> None:
    """3,000 threads in one call. RLIMIT_NPROC does not hold for host root; the call's
    cgroup (pids.max = max_tasks) does, where the host offers one."""
    code = """
import threading, time
started = 0
stop = threading.Event()
try:
    for _ in range(3000):
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
except RuntimeError as error:
    print(error)
stop.set()
result = started
"""
    outcome = run_python(code, TABLES, settings=SandboxSettings())
    assert isinstance(outcome.result, int)
    assert outcome.result < 3000
    print(f"thread bomb: {outcome.result} threads, layers {outcome.isolation}")
    found = sandbox_cgroup.host()
    if os.geteuid() == 0 and found is not None:
        assert outcome.result < SandboxLimits().max_tasks
        assert set(found.layers()) <= set(outcome.isolation)
        assert "can't start new thread" in outcome.stdout
    assert "host_budget" in outcome.isolation


def test_cgroup_is_removed_after_the_call() -> None:
    run_python("result = 1", TABLES, settings=SandboxSettings())
    assert sandbox_cgroup.running(os.getpid()) == []


def test_cgroups_of_dead_owners_are_swept() -> None:
    found = sandbox_cgroup.host()
    if found is None:
        pytest.skip("this host offers no cgroup for the sandbox")
    dead = sandbox_cgroup.CallCgroup(found, f"{sandbox_cgroup.PREFIX}999999999-0", 2**26, 8)
    live = sandbox_cgroup.CallCgroup(found, f"{sandbox_cgroup.PREFIX}{os.getpid()}-live", 2**26, 8)
    dead.create()
    live.create()
    try:
        sandbox_cgroup.sweep(found)
        assert not any(folder.exists() for folder in dead.folders)
        assert all(folder.exists() for folder in live.folders)
    finally:
        live.remove()
        dead.remove()


# -- scratch folders of a killed server ------------------------------------------------------

HOLD_A_FOLDER = """
import sys, time
from dagwright.data.sandbox_scratch import scratch_folder
with scratch_folder() as folder:
    print(folder, flush=True)
    time.sleep(120)
"""


def folder_holder(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_FOLDER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def test_sweep_removes_folders_of_dead_owners_only(tmp_path: Path) -> None:
    dead, dead_folder = folder_holder(tmp_path)
    live, live_folder = folder_holder(tmp_path)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        assert dead_folder.is_dir()  # what a killed server leaves
        recent_legacy = tmp_path / "dagwright-sandbox-legacy"  # no lock file, seconds old
        recent_legacy.mkdir()
        old_legacy = tmp_path / "dagwright-sandbox-old"
        old_legacy.mkdir()
        os.utime(old_legacy, (time.time() - 7200, time.time() - 7200))
        removed = sandbox_scratch.sweep(tmp_path)
        assert set(removed) == {dead_folder, old_legacy}
        assert live_folder.is_dir()
        assert recent_legacy.is_dir()
    finally:
        live.kill()
        live.wait()


# -- a real server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def budget_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("budget")


@pytest.fixture(scope="module")
def scratch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch")


@pytest.fixture(scope="module")
def budget_server(
    tmp_path_factory: pytest.TempPathFactory, budget_dir: Path, scratch_dir: Path
) -> Iterator[ServerProcess]:
    """A server whose host budget is 2 calls, 1 waiting for at most 0.3 s, 1 GB a call."""
    data_dir = tmp_path_factory.mktemp("budget-server")
    # A folder as a killed server leaves it: its owner's lock is gone.
    stale = scratch_dir / "dagwright-sandbox-999999999-stale"
    stale.mkdir()
    (stale / sandbox_scratch.OWNER_FILE).touch()
    server = ServerProcess(
        data_dir=data_dir,
        replica="budget",
        env={
            "DAGWRIGHT_SANDBOX_BUDGET_DIR": str(budget_dir),
            "DAGWRIGHT_SANDBOX_MAX_CONCURRENT": "2",
            "DAGWRIGHT_SANDBOX_QUEUE_MAX": "1",
            "DAGWRIGHT_SANDBOX_QUEUE_WAIT_S": "0.3",
            "DAGWRIGHT_SANDBOX_MAX_CALL_MB": "1024",
            "TMPDIR": str(scratch_dir),
        },
    ).start()
    try:
        yield server
    finally:
        server.stop()


def python_flow(code: str, memory_mb: int = 512) -> dict[str, Any]:
    return flow(
        [
            node("tables", "json_input", name="tables"),
            node("py", "python_on_tables", code=code, memory_mb=memory_mb),
            node("out", "output", name="result"),
        ],
        [edge("tables", "py.tables"), edge("py.result", "out")],
        name="budget",
    )


def test_server_sweeps_stale_folders_at_start_up(
    budget_server: ServerProcess, scratch_dir: Path
) -> None:
    assert not (scratch_dir / "dagwright-sandbox-999999999-stale").exists()
    assert "a cgroup v" in budget_server.output() or sandbox_cgroup.host() is None


def test_server_refuses_memory_above_the_ceiling_at_check_time(
    budget_server: ServerProcess,
) -> None:
    api = budget_server.api()
    try:
        response = api.http.post(
            "/api/v1/validate", json={"flow": python_flow("result = 1", memory_mb=16384)}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["ok"] is False
        (problem,) = body["problems"]
        text = str(problem)
        assert problem.get("node") == "py", problem
        assert "memory_mb" in text, problem
        assert "1024 MB" in text, problem
    finally:
        api.close()


def test_server_answers_429_when_the_sandboxes_are_full_and_stays_responsive(
    budget_server: ServerProcess, budget_dir: Path
) -> None:
    """4 sync runs at once on a 2-slot, 1-waiter budget: two run, the others are refused
    with 429 and Retry-After, and the health probe never waits."""
    api: Api = budget_server.api()
    slug = f"budget-{uuid.uuid4().hex[:8]}"
    try:
        key = api.published_app(slug, python_flow("import time\ntime.sleep(4)\nresult = 1"))
        answers: list[httpx.Response] = []
        lock = threading.Lock()

        def call() -> None:
            answer = api.run(slug, key, {"tables": {"t": [{"a": 1}]}})
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=call, daemon=True) for _ in range(4)]
        with health_probe(budget_server.base_url):
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [200, 200, 429, 429], [a.text for a in answers]
        for answer in answers:
            if answer.status_code == 429:
                assert answer.headers["Retry-After"] == "1"
                assert answer.json()["error"]["code"] == "sandbox_busy"
            else:
                assert answer.json()["status"] == "succeeded", answer.text
        assert sandbox_budget.in_use(SandboxBudget(folder=str(budget_dir), max_concurrent=2)) == 0
    finally:
        api.close()


def test_busy_is_a_429_with_retry_after_to_any_route() -> None:
    """Where a route lets the error through (not a run's node), the one mapping answers."""
    from dagwright.api.errors import dagwright_error_response

    response = dagwright_error_response(SandboxBusyError("busy", retry_after=5))
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 5  # whole seconds, rounded up
    assert isinstance(SandboxBusyError("busy", 1), SandboxError)  # a node failure to a flow

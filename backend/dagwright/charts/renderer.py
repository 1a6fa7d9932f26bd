"""Charts rendered to SVG or PNG out of the server's process: each render is a fresh child
Python (`_render_child.py`, which runs vl-convert) under the sandbox's bubblewrap isolation
(`dagwright.data.isolation`): no network, nothing of the host's files but the Python runtime,
uid 65534, with a memory limit (RLIMIT_DATA) and a wall-clock deadline that kills it.

Why a child: vl-convert's V8 runs in the calling process and holds the GIL while it renders;
in the server a 1,000,000-point sequence ended the process (V8's fatal out-of-memory), 2,000
views froze every other request for 40 s, and one `javascript:` link broke every later render
(issue 29). In a child, a bomb ends the child; the server only awaits a pipe (asyncio), so its
event loop and GIL stay free; and nothing of one render's engine survives into the next.

At most `concurrency` children run at once; a request that finds them busy waits up to
QUEUE_WAIT_S, then gets 429 `charts_busy` with Retry-After. Without bubblewrap nothing renders
(`sandbox_unavailable`) unless the operator allowed the unisolated sandbox, as for Python.
A cold child costs ~0.4-0.6 s (Python's and V8's start), so `spares` children are kept started
and warm (on a fixed spec of ours), each serving one request and then replaced: ~0.1 s a
render. docs/security/charts.md has the whole design.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from dagwright.charts import ChartError
from dagwright.charts._render_child import READY, RENDER_REFUSED
from dagwright.charts.policy import MAX_ROWS, SpecLimits, check_spec
from dagwright.data.isolation import (
    INSIDE,
    INSIDE_SCRATCH,
    SandboxSettings,
    bwrap_argv,
    parent_of,
    probe,
    read_child_pid,
    runtime_paths,
)
from dagwright.errors import RetryLaterError

log = logging.getLogger(__name__)

Format = Literal["svg", "png"]

_CHILD = Path(__file__).with_name("_render_child.py")
_INSIDE_CHILD = f"{INSIDE}/_render_child.py"
# How long a request waits for a free child before 429: a render takes ~0.4 to a few
# seconds, so a short burst is absorbed and a flood is refused.
QUEUE_WAIT_S = 2.0
# The image returned: a 50,000-row scatter plot is ~11 MB of SVG.
MAX_IMAGE_BYTES = 32 * 1024 * 1024
# What of the child's stderr is kept: vl-convert's message, or V8's last words.
_MAX_STDERR_BYTES = 64 * 1024
# The child writes nothing to files; its scratch tmpfs only exists because bwrap_argv makes
# one.
_SCRATCH_BYTES = 1024 * 1024
# Words by which a crash shows it ran out of memory (V8's fatal abort, Rust's allocator).
_MEMORY_HINTS = ("out of memory", "memory allocation", "MemoryError", "Cannot allocate memory")
# V8's own words for why it stopped, ahead of the stack trace it prints after them.
_V8_FATAL = ("Fatal", "Check failed")
# How long an ended child's pipes may take to close (its namespace's processes dying).
_END_TIMEOUT_S = 10.0
# The least RLIMIT_DATA under which V8 starts at all (512 MiB does not; 640 MiB does).
MIN_MEMORY_MB = 640


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """The renderer's bounds (settings DAGWRIGHT_CHARTS_CONCURRENCY, _TIMEOUT, _MEMORY_MB,
    _MAX_ROWS)."""

    concurrency: int = 2
    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_rows: int = MAX_ROWS
    queue_wait_s: float = QUEUE_WAIT_S
    spares: int = 2  # children kept started and warm, each for one request

    def __post_init__(self) -> None:
        if self.memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"chart memory must be at least {MIN_MEMORY_MB} MB for V8")


class ChartsBusyError(RetryLaterError):
    """Every render child is busy (HTTP 429 with Retry-After)."""

    code = "charts_busy"


@dataclass(slots=True)
class _Child:
    """One render child: used for one request, then ended."""

    process: asyncio.subprocess.Process
    kill_group: bool  # unisolated: killed as a process group
    ready: bool = False
    init: int | None = None  # under bwrap: a pidfd of the sandbox's init (its PID namespace)

    def pin(self, pid: int | None) -> None:
        """Keeps a pidfd of the sandbox's init, once sure it is bwrap's child (not a process
        that reused its pid), as the Python sandbox does."""
        if pid is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return  # already gone
        if parent_of(pid) != self.process.pid:
            os.close(fd)
            return
        self.init = fd

    async def end(self) -> None:
        """SIGKILL to the sandbox's init, after which the kernel kills its namespace (killing
        only bwrap leaves a window at its start where --die-with-parent is not yet set), and
        to bwrap; then waits for its end and its pipes' (the namespace's last process)."""
        if self.process.returncode is None:
            if self.init is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.init, signal.SIGKILL)
            _kill(self.process.pid, self.kill_group)
        try:
            await asyncio.wait_for(self.process.wait(), _END_TIMEOUT_S)
        except TimeoutError:
            log.warning("a chart render child %d did not end", self.process.pid)
        finally:
            if self.init is not None:
                os.close(self.init)
                self.init = None


class ChartRenderer:
    """Renders chart specs in bounded, isolated child processes; one per server."""

    def __init__(self, limits: RenderLimits, sandbox: SandboxSettings) -> None:
        self.limits = limits
        self.sandbox = sandbox
        self._slots = asyncio.Semaphore(limits.concurrency)
        self._spares: list[_Child] = []  # started, warm, waiting for a request
        self._filling: asyncio.Task[None] | None = None

    async def render(self, spec: Mapping[str, Any], fmt: Format, scale: float = 1.0) -> bytes:
        """The chart as SVG text (UTF-8) or PNG bytes. Raises ChartError: `chart_invalid`
        (the policy or vl-convert refused it), `chart_timeout`, `chart_memory`,
        `sandbox_unavailable`; ChartsBusyError when every child is busy."""
        check_spec(spec, SpecLimits(max_rows=self.limits.max_rows))
        try:
            await asyncio.wait_for(self._slots.acquire(), self.limits.queue_wait_s)
        except TimeoutError:
            raise ChartsBusyError(
                f"{self.limits.concurrency} charts are rendering; try again shortly",
                retry_after=self.limits.queue_wait_s,
            ) from None
        try:
            return await self.render_unchecked(spec, fmt, scale)
        finally:
            self._slots.release()

    async def render_unchecked(
        self, spec: Mapping[str, Any], fmt: Format, scale: float = 1.0
    ) -> bytes:
        """One render in a child of its own, without the policy or the pool's bound (tests
        use it to show what the child's isolation holds alone)."""
        request = json.dumps({"spec": spec, "format": fmt, "scale": scale}).encode()
        child: _Child | None = None
        try:
            # The deadline counts a cold child's start too: a warm spare has done it already.
            async with asyncio.timeout(self.limits.timeout_s):
                child = await self._take()
                image, stderr = await _exchange(child.process, request)
                returncode = await child.process.wait()
        except TimeoutError:
            raise ChartError(
                f"the chart took longer than {self.limits.timeout_s:g} s to render",
                "chart_timeout",
            ) from None
        finally:
            if child is not None:
                await child.end()
        return self._outcome(returncode, image, stderr)

    async def close(self) -> None:
        """Ends the warm spares (a server's die with it anyway: bwrap's --die-with-parent)."""
        if self._filling is not None:
            self._filling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._filling
        spares, self._spares = self._spares, []
        for child in spares:
            await child.end()

    async def _take(self) -> _Child:
        """A warm spare if one is alive, else a child started now; then spares are made
        again in the background, for the next request."""
        child: _Child | None = None
        while self._spares and child is None:
            spare = self._spares.pop(0)
            if spare.process.returncode is None:
                child = spare
            else:
                await spare.end()
        if child is None:
            child = await self._spawn()
        if self._filling is None or self._filling.done():
            self._filling = asyncio.get_running_loop().create_task(self._fill())
        return child

    async def _fill(self) -> None:
        while len(self._spares) < self.limits.spares:
            try:
                child = await asyncio.wait_for(self._spawn(), self.limits.timeout_s)
            except (ChartError, OSError, TimeoutError) as exc:
                log.warning("no warm chart renderer: %s", exc)
                return
            if not child.ready:
                await child.end()
                return
            self._spares.append(child)

    async def _spawn(self) -> _Child:
        """A child started now, once its engine is warm (or it ended trying). Under bwrap,
        the sandbox's pid is read (--info-fd) and pinned before its command may start
        (--block-fd)."""
        info_r, info_w = os.pipe2(os.O_CLOEXEC)
        block_r, block_w = os.pipe2(os.O_CLOEXEC)
        try:
            fds = {"info": info_w, "block": block_r}
            argv, kill_group = await self._command(fds)
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd="/",
                env=_environment(INSIDE_SCRATCH if not kill_group else tempfile.gettempdir()),
                start_new_session=True,
                pass_fds=() if kill_group else (info_w, block_r),
            )
        except BaseException:
            for fd in (info_r, block_w):
                os.close(fd)
            raise
        finally:
            os.close(info_w)
            os.close(block_r)
        child = _Child(process, kill_group)
        try:
            if kill_group:
                os.close(info_r)
            else:
                child.pin(read_child_pid(await _read_all(info_r)))
            with contextlib.suppress(BrokenPipeError):
                os.write(block_w, b"x")
            os.close(block_w)
            block_w = -1
            assert process.stdout is not None
            child.ready = await process.stdout.read(len(READY)) == READY  # b"": it ended
        except BaseException:
            await child.end()
            raise
        finally:
            if block_w != -1:
                os.close(block_w)
        return child

    def _outcome(self, returncode: int, image: bytes | None, stderr: bytes) -> bytes:
        message = stderr.decode(errors="replace").strip()
        if returncode == 0 and image is not None:
            return image
        if image is None:
            raise ChartError(
                f"the chart's image is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB",
                "chart_memory",
            )
        if returncode == RENDER_REFUSED:
            raise ChartError(f"the chart cannot be rendered: {message}")
        if any(hint in message for hint in _MEMORY_HINTS):
            raise ChartError(
                f"the chart needs more than {self.limits.memory_mb} MB to render",
                "chart_memory",
            )
        raise ChartError(
            f"the chart's renderer crashed: {_crash_reason(message, returncode)}", "chart_failed"
        )

    async def _command(self, fds: dict[str, int]) -> tuple[list[str], bool]:
        """The child's command line, and whether it runs unisolated (then it is killed as a
        process group, and `fds` are not used)."""
        site = _vl_convert_site()
        found = await asyncio.to_thread(probe, self.sandbox)  # once per process, then cached
        extra = [site] if site else []
        if not found.available:
            if not self.sandbox.allow_unisolated:
                raise ChartError(
                    "charts are not rendered on this server: the sandbox needs bubblewrap, "
                    f"and {found.problem}. Render them in the browser, install bubblewrap, or "
                    "allow the unisolated sandbox (DAGWRIGHT_SANDBOX_ALLOW_UNISOLATED=1)",
                    "sandbox_unavailable",
                )
            command = [sys.executable, "-I", "-B", str(_CHILD), str(self.limits.memory_mb)]
            return [*command, *extra], True
        binds = [(str(_CHILD), _INSIDE_CHILD), *((s, s) for s in extra)]
        command = [sys.executable, "-I", "-B", _INSIDE_CHILD, str(self.limits.memory_mb)]
        argv = bwrap_argv(
            found.bwrap,
            job=None,
            scratch_bytes=_SCRATCH_BYTES,
            fds=fds,
            command=[*command, *extra],
            environment=_environment(INSIDE_SCRATCH),
            ro_binds=binds,
        )
        return argv, False


async def _exchange(
    process: asyncio.subprocess.Process, request: bytes
) -> tuple[bytes | None, bytes]:
    """Sends the request and reads the image (None past MAX_IMAGE_BYTES) and stderr."""
    assert process.stdout is not None
    assert process.stderr is not None

    async def send() -> None:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            process.stdin.write(request)
            await process.stdin.drain()
        process.stdin.close()

    _, image, stderr = await asyncio.gather(
        send(),
        _read_capped(process.stdout, MAX_IMAGE_BYTES),
        _read_capped(process.stderr, _MAX_STDERR_BYTES, keep_tail=True),
    )
    return image, stderr or b""


async def _read_all(fd: int) -> bytes:
    """What bwrap writes on its info pipe, read on the event loop (closes `fd`)."""
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    try:
        return await reader.read()  # bwrap closes it once the pid is written
    finally:
        transport.close()


async def _read_capped(
    stream: asyncio.StreamReader, cap: int, keep_tail: bool = False
) -> bytes | None:
    """Everything until EOF; past `cap`: None, or (keep_tail) its last `cap` bytes."""
    data = bytearray()
    over = False
    while chunk := await stream.read(256 * 1024):
        data += chunk
        if len(data) > cap:
            over = True
            del data[: len(data) - cap]
    if over and not keep_tail:
        return None
    return bytes(data)


def _kill(pid: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def _environment(home: str) -> dict[str, str]:
    """Built from nothing: API keys and database URLs stay out of the child."""
    return {"PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "TZ": "UTC"}


@cache
def _vl_convert_site() -> str | None:
    """The folder vl_convert is installed in, when the sandbox's runtime paths do not hold it
    (a virtual environment that reaches another one's packages); None when they do."""
    spec = importlib.util.find_spec("vl_convert")
    if spec is None or not spec.submodule_search_locations:
        raise ChartError(
            "rendering charts needs the vl-convert-python package, which is not installed"
        )
    site = os.path.dirname(os.path.realpath(next(iter(spec.submodule_search_locations))))
    if any(site == p or site.startswith(p.rstrip("/") + "/") for p in runtime_paths()):
        return None
    return site


def _crash_reason(stderr: str, returncode: int) -> str:
    """What a crashed child said: V8's fatal line (e.g. "Fatal JavaScript invalid size
    error") rather than the last frame of the stack trace it prints after it."""
    lines = [line.strip("# ").strip() for line in stderr.splitlines() if line.strip("# ")]
    fatal = [line for line in lines if any(word in line for word in _V8_FATAL)]
    chosen = fatal[0] if fatal else (lines[-1] if lines else f"exit code {returncode}")
    return chosen[:300]

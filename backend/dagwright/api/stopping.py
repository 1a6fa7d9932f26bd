"""What a server does the moment it is told to stop, before uvicorn's grace period runs.

uvicorn gives the requests in flight its grace period (`timeout_graceful_shutdown`), then
cancels them, then runs the lifespan's shutdown. A request waiting on heavy work (a debug run
in a minutes-long DuckDB query) would use the whole grace and be cut off ("timeout graceful
shutdown exceeded"): so at SIGTERM/SIGINT the heavy work is stopped first (the composition's
`stop_heavy_work`: queued calls dropped, queries interrupted), its requests answer (their runs
failed, `shutting_down`), and the shutdown completes within the grace.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from types import FrameType

Handler = Callable[[int, FrameType | None], object]


def stop_first_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None]) -> None:
    """Chains `stop()` (called on `loop`) before the server's own SIGTERM and SIGINT handlers
    (uvicorn's, which it restores when it has stopped). Only the main thread can set signal
    handlers: a server serving from another thread (the in-process test servers) keeps its
    own."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        if not callable(previous):
            continue  # not a server's handler (the default or ignored): leave it
        signal.signal(signum, _chained(loop, stop, previous))


def _chained(
    loop: asyncio.AbstractEventLoop, stop: Callable[[], None], previous: Handler
) -> Handler:
    def handler(signum: int, frame: FrameType | None) -> object:
        # Not `stop()` here: a signal handler runs between two bytecodes of the main thread,
        # which may hold the very pool lock `stop` takes. The loop runs it next.
        loop.call_soon_threadsafe(stop)
        return previous(signum, frame)

    return handler

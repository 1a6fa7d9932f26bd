"""Running the scripted model server in-process, on a thread of its own (tests, offline demo).

with ScriptedServer(script) as server:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x")
    ...
    server.stats()["requests"]
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from types import TracebackType

import uvicorn

from dagwright.llm.scripted.script import Script
from dagwright.llm.scripted.server import create_app
from dagwright.llm.scripted.state import ScriptedState, Stats

STARTUP_TIMEOUT = 10.0
# uvicorn waits this long for requests in flight when stopping, then cancels them.
GRACEFUL_SHUTDOWN = 1


class ScriptedServer:
    """The scripted server on 127.0.0.1 (a free port unless one is given), in a daemon thread.

    `start` returns once the server accepts connections; `stop` returns within about two
    seconds, even with requests hanging. It is also a context manager.
    """

    def __init__(self, script: Script, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = script
        self.host = host
        self._requested_port = port
        self._state = ScriptedState(script)
        self._port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._port is None:
            raise RuntimeError("the scripted server is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL to give clients: ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def stats(self) -> Stats:
        """Requests, concurrency, counts per rule and the recent log (see GET /_scripted/stats)."""
        return self._state.stats()

    def reset(self) -> None:
        """Forget counters, sequence positions and the log."""
        self._state.reset()

    def start(self) -> ScriptedServer:
        """Bind the socket, serve on a thread, and return once the server is up."""
        if self._thread is not None:
            raise RuntimeError("the scripted server was started already")
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and
        # without it each keep-alive response waits ~40 ms for the client's delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._requested_port))
        except OSError:
            sock.close()
            raise
        self._port = sock.getsockname()[1]
        self._closing = asyncio.Event()
        app = create_app(self.script, state=self._state, closing=self._closing)
        # log_config=None: the host process's logging is left as it is. uvicorn's default
        # dictConfig would close every handler the process has (the CLI's, a test runner's).
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
        )
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=self._serve, args=(server, sock), name="scripted-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                self._thread.join(timeout=2)
                sock.close()
                raise RuntimeError("the scripted server did not start") from self._failure
            time.sleep(0.005)
        return self

    def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                runner.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported by start(); a thread has nowhere else to say
            self._failure = exc
        finally:
            sock.close()

    def stop(self) -> None:
        """Stop serving; hanging requests are ended first so this stays quick."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        loop, closing = self._loop, self._closing
        if loop is not None and closing is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                loop.call_soon_threadsafe(closing.set)
        server.should_exit = True
        thread.join(timeout=GRACEFUL_SHUTDOWN + 2)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=2)
        self._server = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

"""The gateway's first model call imports the openai client (with aiohttp and its TLS
context: ~0.3 s) on a thread, not on the event loop: imported there it froze every request of
a server for that long at its first model call (benchmarks/autotqa_at_scale.py saw a 335 ms
health probe when an AutoTQA evaluation started), nor on the loop's executor threads (a
server's API threads, which its handlers wait on) by each of the first calls at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Run in a fresh interpreter: this one has imported openai already (other tests).
PROGRAM = textwrap.dedent(
    """
    import asyncio, json, sys, threading

    from dagwright.llm.gateway import ChatRequest
    from support.models import gateway_for, scripted_server

    before = "openai" in sys.modules
    imported_on = []

    def audit(event, args):
        if event == "import" and args[0] in ("openai", "aiohttp"):
            imported_on.append(threading.current_thread().name)

    sys.addaudithook(audit)

    async def main():
        loop_thread = threading.current_thread().name
        gateway = gateway_for(server)
        try:
            request = ChatRequest(messages=[{"role": "user", "content": "hello"}])
            results = await asyncio.gather(*(gateway.chat(None, request) for _ in range(8)))
        finally:
            await gateway.aclose()
        return loop_thread, [r.choices[0] for r in results]

    with scripted_server({"rules": [], "default_reply": "hi"}) as server:
        loop_thread, choices = asyncio.run(main())
    print(json.dumps({"before": before, "loop": loop_thread, "imports": imported_on,
                      "choices": choices}))
    """
)


def test_the_first_model_call_imports_the_client_off_the_event_loop() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=TESTS,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] is False  # the call below is the first to need it
    assert seen["choices"] == ["hi"] * 8
    assert seen["imports"], "openai was never imported"
    assert seen["loop"] not in seen["imports"], "the client was imported on the event loop"
    assert set(seen["imports"]) == {"dagwright-client-import"}, seen["imports"]

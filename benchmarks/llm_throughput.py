"""LLM call overhead: chained chat calls against the scripted server, which runs in its own
process answering after 100 ms, so what it costs is measured apart from what dagwright costs.

(1) One call at a time: raw HTTP (httpx2, the server's own time), the gateway, a chat node in
    a flow; dagwright's share is gateway - raw HTTP. Target: flow overhead <= 2 ms at p50.
(2) 200 concurrent runs of a flow of two chained chat calls, streamed and not, beside three
    baselines in the same run making the same two chained calls: a floor (the least code on a
    raw socket), bare aiohttp POSTs (the HTTP client under the gateway), and the openai client
    on its own by its cheapest way (its generic POST over aiohttp, as the gateway builds it).
    For each: runs/s, the overhead per call beyond the server's 100 ms (p50, from the calls'
    latencies and from the runs'), and CPU per call of this process and of the server's
    process (read from /proc). CPU per call is the figure to trust on a shared machine;
    wall-clock overhead also counts other processes' turns on the cores. Targets: dagwright's
    share (flow - floor) <= 20 ms at p50 and streaming within 10% of non-streaming throughput.
    All the calls of a phase start at once, so a call waits for the CPU of the calls ahead of
    it: its overhead grows with the CPU per call, and the openai client's own CPU puts it
    over that target before any of dagwright's code runs; what dagwright adds beyond the
    client is printed beside it.

The provider's max_concurrency defaults to the number of runs: with fewer slots, calls wait
for one (64 slots x 100 ms serve 640 calls/s; 200 runs wanting one each wait ~300 ms), which
is the configured limit at work, not overhead. Every phase checks, with the server's own
request count, that it made exactly the calls it claims.

Run: .venv/bin/python benchmarks/llm_throughput.py [--runs 200] [--latency-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from dagwright.llm.gateway import ChatRequest, LLMGateway
from dagwright.llm.providers import ProviderSettings, scripted_provider
from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeUsage,
    RunResult,
    compile_flow,
    parse_flow,
)
from dagwright.runtime.plan import CompiledFlow

TARGET_FLOW_OVERHEAD_MS = 2.0
TARGET_LOADED_OVERHEAD_MS = 20.0
TARGET_STREAMING_SHARE = 0.9  # streamed runs/s at least this share of non-streamed
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MESSAGES = [{"role": "user", "content": "hello"}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    base_url: str

    def cpu_seconds(self) -> float:
        """User + system CPU of the server's process so far."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def requests(self) -> int:
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/_scripted/stats", timeout=10) as answer:
            count: int = json.load(answer)["requests"]
            return count


def start_server(latency_ms: int) -> Server:
    script = Path(tempfile.mkdtemp()) / "bench.json"
    script.write_text(json.dumps({"latency_ms": latency_ms, "default_reply": "fine, thanks"}))
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dagwright",
            "mock-llm",
            "--script",
            str(script),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=1):
                return Server(process, base_url)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the scripted server did not start")


def two_call_flow(stream: bool) -> CompiledFlow:
    doc: dict[str, Any] = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "two_calls",
        "nodes": [
            {"id": "q", "block": "text_input", "config": {"name": "question"}},
            {
                "id": "first",
                "block": "chat",
                "config": {"prompt": "Plan: {{ question }}", "stream": stream},
            },
            {
                "id": "second",
                "block": "chat",
                "config": {"prompt": "Answer using {{ plan }}", "stream": stream},
            },
            {"id": "out", "block": "output", "config": {"name": "answer"}},
        ],
        "edges": [
            {"source": {"node": "q"}, "target": {"node": "first", "port": "question"}},
            {"source": {"node": "first"}, "target": {"node": "second", "port": "plan"}},
            {"source": {"node": "second"}, "target": {"node": "out", "port": "value"}},
        ],
    }
    return compile_flow(parse_flow(doc), Registry.default())


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def make_gateway(base_url: str, concurrency: int) -> LLMGateway:
    provider = scripted_provider(base_url, max_concurrency=concurrency)
    return LLMGateway(ProviderSettings().with_provider(provider, default=True))


async def timed_calls(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    """Seconds per call, one at a time, after three warm-up calls."""
    times = []
    for i in range(calls + 3):
        began = time.perf_counter()
        await call()
        if i >= 3:
            times.append(time.perf_counter() - began)
    return times


async def uncontended(base_url: str, calls: int) -> dict[str, float]:
    """p50 seconds of one call at a time: raw HTTP (the server's own time), the gateway,
    and one chat node in a flow (half a run of the two-call flow)."""
    body = {"model": "scripted", "messages": MESSAGES}
    gateway = make_gateway(base_url, 4)
    executor = Executor(ExecutorOptions(services=BlockServices({MODELS: gateway})))
    plan = two_call_flow(stream=False)
    async with httpx2.AsyncClient() as client:

        async def raw() -> None:
            (await client.post(f"{base_url}/chat/completions", json=body)).json()

        raw_times = await timed_calls(raw, calls)
    try:
        gateway_times = await timed_calls(
            lambda: gateway.chat(None, ChatRequest(messages=MESSAGES)), calls
        )
        runs = await timed_calls(lambda: executor.run(plan, {"question": "hello"}), calls // 2)
    finally:
        await gateway.aclose()
    return {
        "raw": percentile(raw_times, 0.5),
        "gateway": percentile(gateway_times, 0.5),
        "flow": percentile(runs, 0.5) / 2,
    }


@dataclass
class Load:
    """One phase under load: runs of two chained calls, all at once."""

    throughput: float  # runs/s
    run_p50: float
    run_p99: float
    call_p50: float
    call_p99: float
    cpu_per_call: float  # this process, seconds
    server_cpu_per_call: float  # the server's process, seconds


async def loaded(
    server: Server, runs: int, run_once: Callable[[int], Awaitable[list[float]]]
) -> Load:
    """Start `runs` runs at once, after as many warm-up runs; each returns its calls'
    latencies. Checks with the server that it answered exactly two calls per run."""
    # Warm-up, as many runs at once: connections open, templates compiled.
    await asyncio.gather(*(run_once(-1 - i) for i in range(runs)))
    requests_before, server_before = server.requests(), server.cpu_seconds()
    cpu_before = time.process_time()

    async def timed(i: int) -> tuple[float, list[float]]:
        began = time.perf_counter()
        calls = await run_once(i)
        return time.perf_counter() - began, calls

    began = time.perf_counter()
    outcomes = await asyncio.gather(*(timed(i) for i in range(runs)))
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu_before
    server_cpu = server.cpu_seconds() - server_before
    answered = server.requests() - requests_before
    calls = [latency for _, latencies in outcomes for latency in latencies]
    if answered != 2 * runs or len(calls) != 2 * runs:
        raise SystemExit(f"expected {2 * runs} calls; server answered {answered}, saw {len(calls)}")
    run_latencies = [elapsed for elapsed, _ in outcomes]
    return Load(
        throughput=runs / wall,
        run_p50=percentile(run_latencies, 0.5),
        run_p99=percentile(run_latencies, 0.99),
        call_p50=percentile(calls, 0.5),
        call_p99=percentile(calls, 0.99),
        cpu_per_call=cpu / len(calls),
        server_cpu_per_call=server_cpu / len(calls),
    )


async def flow_runs(server: Server, runs: int, stream: bool, concurrency: int) -> Load:
    gateway = make_gateway(server.base_url, concurrency)
    executor = Executor(ExecutorOptions(services=BlockServices({MODELS: gateway})))
    plan = two_call_flow(stream)

    async def run_once(i: int) -> list[float]:
        result: RunResult = await executor.run(plan, {"question": f"question {i}"})
        if result.status != "succeeded":
            raise SystemExit(f"a run failed: {result.error}")
        return [
            event.call.latency
            for event in result.events
            if isinstance(event, NodeUsage) and event.call.latency is not None
        ]

    try:
        return await loaded(server, runs, run_once)
    finally:
        await gateway.aclose()


def two_chained_calls(
    post: Callable[[str], Awaitable[str]],
) -> Callable[[int], Awaitable[list[float]]]:
    """A run of the baselines: two chained calls, the second asking with the first's answer."""

    async def run_once(i: int) -> list[float]:
        latencies, content = [], f"question {i}"
        for _ in range(2):
            began = time.perf_counter()
            content = await post(content)
            latencies.append(time.perf_counter() - began)
        return latencies

    return run_once


def _answer(body: dict[str, Any]) -> str:
    content: str = body["choices"][0]["message"]["content"]
    return content


async def bare_aiohttp_runs(server: Server, runs: int, concurrency: int) -> Load:
    """A baseline: the HTTP client under the gateway (aiohttp) posting the same JSON."""
    import aiohttp

    url = f"{server.base_url}/chat/completions"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def post(content: str) -> str:
            body = {"model": "scripted", "messages": [{"role": "user", "content": content}]}
            async with session.post(url, json=body) as answer:
                return _answer(await answer.json())

        return await loaded(server, runs, two_chained_calls(post))


async def openai_client_runs(server: Server, runs: int, concurrency: int) -> Load:
    """A baseline: the openai client on its own, as the gateway builds it (over aiohttp, a
    pool as large as the calls in flight) and by its cheapest way, its generic POST read as
    raw JSON: what the client the brief mandates costs before any of dagwright's code."""
    import openai

    client = openai.AsyncOpenAI(
        base_url=server.base_url,
        api_key="not-needed",
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(
            limits=httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        ),
    )

    async def post(content: str) -> str:
        body = {"model": "scripted", "messages": [{"role": "user", "content": content}]}
        answer = await client.post("/chat/completions", cast_to=httpx2.Response, body=body)
        return _answer(json.loads(answer.content))

    try:
        return await loaded(server, runs, two_chained_calls(post))
    finally:
        await client.close()


async def raw_socket_runs(server: Server, runs: int) -> Load:
    """The floor: the same two chained calls per run written and read on a socket of the
    run's own by the least code that can, so their latency is the server's (and the
    machine's) share; what a dagwright call takes beyond it is dagwright's share."""
    root = server.base_url.removesuffix("/v1")
    host, port = root.removeprefix("http://").split(":")
    sockets = {}

    async def exchange(i: int, content: str) -> str:
        run = i % runs  # the warm-up's runs (-1, -2, ...) open the connections
        if run not in sockets:
            sockets[run] = await asyncio.open_connection(host, int(port))
        reader, writer = sockets[run]
        body = json.dumps(
            {"model": "scripted", "messages": [{"role": "user", "content": content}]}
        ).encode()
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (host.encode(), len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        answer: str = json.loads(await reader.readexactly(length))["choices"][0]["message"][
            "content"
        ]
        return answer

    async def run_once(i: int) -> list[float]:
        return await two_chained_calls(lambda content: exchange(i, content))(i)

    try:
        return await loaded(server, runs, run_once)
    finally:
        for _, writer in sockets.values():
            writer.close()


def describe(label: str, figures: Load, latency: float) -> str:
    return (
        f"    {label}: {figures.throughput:.1f} runs/s; run p50 {figures.run_p50 * 1e3:.0f} ms, "
        f"p99 {figures.run_p99 * 1e3:.0f} ms; per call p50 {figures.call_p50 * 1e3:.0f} ms "
        f"(overhead {(figures.call_p50 - latency) * 1e3:.1f} ms), p99 "
        f"{figures.call_p99 * 1e3:.0f} ms; CPU per call: this process "
        f"{figures.cpu_per_call * 1e3:.2f} ms, server {figures.server_cpu_per_call * 1e3:.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument(
        "--provider-concurrency",
        type=int,
        default=0,
        help="the provider's max_concurrency (calls in flight); default: --runs",
    )
    args = parser.parse_args()
    concurrency = args.provider_concurrency or args.runs
    latency = args.latency_ms / 1000
    server = start_server(args.latency_ms)
    try:
        print(f"scripted server in its own process, answering after {args.latency_ms} ms")
        one = asyncio.run(uncontended(server.base_url, args.calls))
        ms = {name: value * 1e3 for name, value in one.items()}
        print(f"\n(1) one call at a time, p50 of {args.calls} calls")
        print(
            f"    raw HTTP request (the server's own time): {ms['raw']:.2f} ms "
            f"= latency + {ms['raw'] - args.latency_ms:.2f} ms"
        )
        for name, label in (("gateway", "dagwright gateway"), ("flow", "chat node in a flow")):
            print(f"    {label}: {ms[name]:.2f} ms, beyond raw HTTP {ms[name] - ms['raw']:.2f} ms")
        ok = ms["flow"] - ms["raw"] <= TARGET_FLOW_OVERHEAD_MS
        print(
            f"    flow overhead {ms['flow'] - ms['raw']:.2f} ms, goal <= "
            f"{TARGET_FLOW_OVERHEAD_MS:g} ms: {'ok' if ok else 'OVER GOAL'}"
        )
        print(
            f"\n(2) {args.runs} concurrent runs x 2 chained chat calls, provider "
            f"max_concurrency {concurrency}"
        )
        floor = asyncio.run(raw_socket_runs(server, args.runs))
        print(describe("floor, least code on a raw socket", floor, latency))
        aiohttp_baseline = asyncio.run(bare_aiohttp_runs(server, args.runs, concurrency))
        print(describe("baseline, bare aiohttp POSTs", aiohttp_baseline, latency))
        client = asyncio.run(openai_client_runs(server, args.runs, concurrency))
        print(describe("baseline, the openai client's own POST", client, latency))
        flows = {}
        for stream in (False, True):
            flows[stream] = asyncio.run(flow_runs(server, args.runs, stream, concurrency))
            print(describe(f"dagwright flow, stream={stream}", flows[stream], latency))
        print()

        # Two views of a call's overhead, each per phase: the calls' own latencies (the
        # issue's figure; a flow's are timed inside the gateway) and its runs' p50, timed alike
        # from outside in every phase, ((run - 2 x latency) / 2), which also counts a flow's
        # executor work between its calls.
        def from_runs(figures: Load) -> float:
            return float(figures.run_p50 / 2 - latency) * 1e3

        def from_calls(figures: Load) -> float:
            return float(figures.call_p50 - latency) * 1e3

        print("    overhead per call p50, from the calls' latencies / from the runs' p50:")
        for label, figures in (
            ("floor", floor),
            ("bare aiohttp", aiohttp_baseline),
            ("the openai client", client),
            ("dagwright flow", flows[False]),
            ("dagwright flow, streamed", flows[True]),
        ):
            print(
                f"      {label}: {from_calls(figures):.1f} / {from_runs(figures):.1f} ms at "
                f"{figures.cpu_per_call * 1e3:.2f} ms CPU per call"
            )
        client_share = from_calls(client) - from_calls(floor)
        print(
            f"    the openai client on its own is {client_share:.1f} ms beyond the floor "
            f"(x{client_share / TARGET_LOADED_OVERHEAD_MS:.1f} the goal): the goal is out of "
            "reach of any flow that calls through it"
        )
        for stream, figures in flows.items():
            share = from_calls(figures) - from_calls(floor)
            verdict = "ok" if share <= TARGET_LOADED_OVERHEAD_MS else "OVER GOAL"
            print(
                f"    stream={stream}: dagwright's share per call p50 (flow - floor) {share:.1f} "
                f"ms, goal <= {TARGET_LOADED_OVERHEAD_MS:g} ms: {verdict}; beyond the openai "
                f"client: {from_runs(figures) - from_runs(client):.1f} ms from the runs, "
                f"+{(figures.cpu_per_call - client.cpu_per_call) * 1e3:.2f} ms CPU per call "
                f"(x{figures.cpu_per_call / client.cpu_per_call:.2f} the client's)"
            )
        wall_share = flows[True].throughput / flows[False].throughput
        cpu_share = flows[False].cpu_per_call / flows[True].cpu_per_call
        for label, value in (("wall clock", wall_share), ("dagwright's CPU per call", cpu_share)):
            verdict = "ok" if value >= TARGET_STREAMING_SHARE else "UNDER GOAL"
            print(
                f"    streaming throughput by {label}: {value:.0%} of non-streaming, goal >= "
                f"{TARGET_STREAMING_SHARE:.0%}: {verdict}"
            )
        print(
            "    (wall-clock figures include waiting for cores shared with other processes; "
            f"server CPU per call streamed {flows[True].server_cpu_per_call * 1e3:.2f} ms vs "
            f"{flows[False].server_cpu_per_call * 1e3:.2f} ms not)"
        )
    finally:
        server.process.terminate()
        server.process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

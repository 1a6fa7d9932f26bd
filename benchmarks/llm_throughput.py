"""LLM call overhead: 200 concurrent runs of a flow with two chained chat calls against the
scripted server (in its own process) answering after 100 ms.

Prints throughput (runs/s), run latency p50/p99, and the overhead per LLM call beyond the
server's 100 ms — measured at the gateway (request to parsed answer) and at the flow level
((run latency - 2 x 100 ms) / 2, which adds template rendering, events and scheduling).
Target: overhead under 2 ms at p50.

Run: .venv/bin/python benchmarks/llm_throughput.py [--runs 200] [--latency-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import openai

from dagwright.llm.gateway import ChatRequest, LLMGateway
from dagwright.llm.providers import ProviderSettings, scripted_provider
from dagwright.registry import Registry
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeUsage,
    RunResult,
    compile_flow,
    parse_flow,
)
from dagwright.runtime.plan import CompiledFlow

TARGET_OVERHEAD_MS = 2.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(latency_ms: int) -> tuple[subprocess.Popen[bytes], str]:
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
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=1):
                return process, base_url
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


async def uncontended(base_url: str, calls: int) -> dict[str, float]:
    """p50 seconds of one call at a time: raw HTTP (the server's own time), the bare openai
    client, the gateway, and one chat node in a flow."""
    body = {"model": "scripted", "messages": [{"role": "user", "content": "hello"}]}
    raw, bare, gateway_times, flow_times = [], [], [], []
    async with httpx.AsyncClient() as client:
        for i in range(calls + 3):
            began = time.perf_counter()
            (await client.post(f"{base_url}/chat/completions", json=body)).json()
            if i >= 3:
                raw.append(time.perf_counter() - began)
    bare_client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    for i in range(calls + 3):
        began = time.perf_counter()
        await bare_client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "hello"}]
        )
        if i >= 3:
            bare.append(time.perf_counter() - began)
    await bare_client.close()
    gateway = make_gateway(base_url, 4)
    executor = Executor(ExecutorOptions(services={LLMGateway: gateway}))
    plan = two_call_flow(stream=False)
    try:
        for i in range(calls + 3):
            began = time.perf_counter()
            await gateway.chat(None, ChatRequest(messages=[{"role": "user", "content": "hello"}]))
            if i >= 3:
                gateway_times.append(time.perf_counter() - began)
        for i in range(calls // 2 + 2):
            began = time.perf_counter()
            await executor.run(plan, {"question": "hello"})
            if i >= 2:
                flow_times.append((time.perf_counter() - began) / 2)
    finally:
        await gateway.aclose()
    return {
        name: percentile(values, 0.5)
        for name, values in (
            ("raw", raw),
            ("openai", bare),
            ("gateway", gateway_times),
            ("flow", flow_times),
        )
    }


async def concurrent_runs(
    base_url: str, runs: int, stream: bool, concurrency: int
) -> dict[str, float]:
    gateway = make_gateway(base_url, concurrency)
    executor = Executor(ExecutorOptions(services={LLMGateway: gateway}))
    plan = two_call_flow(stream)
    try:
        await executor.run(plan, {"question": "warm-up"})

        async def timed(i: int) -> tuple[float, RunResult]:
            began = time.perf_counter()
            result = await executor.run(plan, {"question": f"question {i}"})
            return time.perf_counter() - began, result

        began = time.perf_counter()
        outcomes = await asyncio.gather(*(timed(i) for i in range(runs)))
        wall = time.perf_counter() - began
    finally:
        await gateway.aclose()
    failed = [r for _, r in outcomes if r.status != "succeeded"]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, e.g. {failed[0].error}")
    run_latencies = [elapsed for elapsed, _ in outcomes]
    call_latencies = [
        event.call.latency
        for _, result in outcomes
        for event in result.events
        if isinstance(event, NodeUsage) and event.call.latency is not None
    ]
    return {
        "throughput": runs / wall,
        "run_p50": percentile(run_latencies, 0.5),
        "run_p99": percentile(run_latencies, 0.99),
        "call_p50": percentile(call_latencies, 0.5),
        "call_p99": percentile(call_latencies, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=100)
    parser.add_argument("--calls", type=int, default=40)
    # The provider's max_concurrency: calls in flight at once (and so HTTP connections; the
    # HTTP pool's bookkeeping grows with their number, see the closing note).
    parser.add_argument("--provider-concurrency", type=int, default=64)
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    process, base_url = start_server(args.latency_ms)
    try:
        print(f"scripted server in its own process, answering after {args.latency_ms} ms")
        one = asyncio.run(uncontended(base_url, args.calls))
        ms = {name: value * 1e3 for name, value in one.items()}
        print(f"\n(1) one call at a time, p50 of {args.calls} calls")
        print(
            f"    raw HTTP request (the server's own time): {ms['raw']:.2f} ms "
            f"= latency + {ms['raw'] - args.latency_ms:.2f} ms of server work"
        )
        for name, label in (
            ("openai", "bare openai client"),
            ("gateway", "dagwright gateway"),
            ("flow", "chat node in a flow"),
        ):
            print(
                f"    {label}: {ms[name]:.2f} ms, overhead beyond the server "
                f"{ms[name] - ms['raw']:.2f} ms"
            )
        own = ms["gateway"] - ms["openai"]
        ok = ms["flow"] - ms["raw"] <= TARGET_OVERHEAD_MS
        print(
            f"    dagwright's own share (gateway - bare client): {own:.2f} ms; flow overhead "
            f"target <= {TARGET_OVERHEAD_MS:g} ms: {'ok' if ok else 'OVER TARGET'}"
        )
        print(
            f"\n(2) {args.runs} concurrent runs x 2 chained chat calls, provider "
            f"max_concurrency {args.provider_concurrency}"
        )
        for stream in (True, False):
            figures = asyncio.run(
                concurrent_runs(base_url, args.runs, stream, args.provider_concurrency)
            )
            print(
                f"    stream={stream}: {figures['throughput']:.1f} runs/s "
                f"({2 * figures['throughput']:.1f} calls/s); run p50 "
                f"{figures['run_p50'] * 1e3:.0f} ms, p99 {figures['run_p99'] * 1e3:.0f} ms "
                f"(critical path {2 * args.latency_ms} ms); per call p50 "
                f"{figures['call_p50'] * 1e3:.0f} ms, p99 {figures['call_p99'] * 1e3:.0f} ms "
                f"(overhead p50 {(figures['call_p50'] - latency) * 1e3:.0f} ms)"
            )
    finally:
        process.terminate()
        process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""AutoTQA orchestration benchmarks.

(a) the orchestrator's own time per round, model and tool time excluded: agents played by
    zero-latency functions (no model, no tool), so all the time measured is the
    orchestrator's — scheduling, the conversation, rendering prompts, answers — without and
    with recording in the database (SQLite); target < 5 ms per round;
(b) the real pipeline (agents as published apps run by the run service, the text-to-SQL
    tool over the demo's hr (SQLite) and payroll (CSV) sources) with the scripted model at
    zero latency: per round, the conversation's time minus the time spent inside the agents'
    and tools' runs; and tokens per question for each scheduler on the scripted cases
    (Figure 1, a wrong column retried, an empty result fixed by a case hint).

The tokens are the scripted model's estimates (one per four characters of prompt and reply),
so they compare the schedulers' prompt volume, not any model's real bill.

Run: .venv/bin/python benchmarks/tqa_orchestration.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dagwright.tqa.agents import AgentCaller, AgentReply, normal_usage
from dagwright.tqa.conversation import AskRequest
from dagwright.tqa.orchestrator import Orchestrator
from dagwright.tqa.tools import Tool

TARGET_MS_PER_ROUND = 5.0
SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "support" / "tqa_script.yaml"
CASES = {
    "figure1": "What is the year-end bonus for Tom?",
    "wrong-column": "What is the bonus of Lucy?",
    "empty-result": "Which department does tom work in?",
}
SCHEDULERS = ("fsm", "llm", "rolling")
NEVER_DONE = "Count the employees forever"
TOOLS = [
    Tool(
        "text_to_sql",
        "autotqa-text-to-sql",
        "SQL",
        datetime.now(UTC),
        datetime.now(UTC),
        "text_to_sql",
    )
]
ROWS = [{"ID": i, "Name": f"name {i}", "Bonus": 1000 + i} for i in range(200)]


class ZeroLatency(AgentCaller):
    """Agents that answer at once: a plan, a tool request, 200 rows, a Critic never done."""

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        usage = normal_usage({"prompt_tokens": 100, "completion_tokens": 20})
        outputs: dict[str, Any]
        if app.endswith("planner"):
            outputs = {"plan": "1. find the rows 2. report"}
        elif app.endswith("engineer"):
            outputs = {"decision": {"action": "tool", "tool": "text_to_sql", "input": {}}}
        elif app.endswith("critic"):
            outputs = {"verdict": {"complete": False, "gaps": ["more"]}}
        else:  # the Executor: its tool's outputs
            rows = {"rows": ROWS, "columns": ["ID", "Name", "Bonus"], "sql": "SELECT 1"}
            rows["row_count"] = len(ROWS)
            outputs = {"tool": "text_to_sql", "inputs": {}, "outputs": rows, "error": None}
        return AgentReply(outputs, usage, None, 0.0)


async def overhead(rounds: int, store: Any) -> float:
    """Milliseconds per round of the orchestrator alone (`rounds` rounds, FSM)."""
    orchestrator = Orchestrator(ZeroLatency(), tools=lambda: TOOLS, store=store)
    started = time.perf_counter()
    done = await orchestrator.ask(AskRequest(question="q", max_rounds=rounds))
    elapsed = time.perf_counter() - started
    assert done.status == "round_limit"
    return elapsed * 1000 / rounds


def part_a(rounds: int) -> None:
    from dagwright.store.db import make_engine, migrate
    from dagwright.tqa.recording import ConversationStore

    print(f"(a) orchestrator alone, zero-latency agents, {rounds} rounds (FSM), 5 repeats")
    memory = [asyncio.run(overhead(rounds, None)) for _ in range(5)]
    with tempfile.TemporaryDirectory() as folder:
        engine = make_engine(f"sqlite:///{folder}/bench.db")
        migrate(engine)
        recorded = [asyncio.run(overhead(rounds, ConversationStore(engine))) for _ in range(5)]
        engine.dispose()
    for label, values in (("in memory", memory), ("recorded (SQLite)", recorded)):
        median = statistics.median(values)
        verdict = "ok" if median < TARGET_MS_PER_ROUND else "OVER TARGET"
        print(
            f"    {label:<18} {median:7.3f} ms/round (min {min(values):.3f}, "
            f"max {max(values):.3f}); target < {TARGET_MS_PER_ROUND} ms: {verdict}"
        )
    ratio = statistics.median(recorded) / statistics.median(memory)
    print(f"    recording costs x{ratio:.1f} the in-memory orchestration")


async def pipeline() -> list[dict[str, Any]]:
    import yaml

    from dagwright.composition import local_tqa
    from dagwright.llm.scripted.runner import ScriptedServer
    from dagwright.llm.scripted.script import Script

    script = Script.model_validate(yaml.safe_load(SCRIPT.read_text(encoding="utf-8")))
    model = ScriptedServer(script).start()
    results: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            settings = Path(folder) / "dagwright.toml"
            settings.write_text(
                'default_provider = "scripted"\n[providers.scripted]\n'
                f'base_url = "{model.base_url}"\ndefault_model = "scripted"\nscripted = true\n'
            )
            os.environ.update(
                DAGWRIGHT_DATA_DIR=folder,
                DAGWRIGHT_SETTINGS=str(settings),
                DAGWRIGHT_DEMO_SOURCES="1",
            )
            os.environ.pop("DAGWRIGHT_DATABASE_URL", None)
            async with local_tqa(lambda message: None) as tqa:
                await tqa.ensure_published()
                await tqa.ask(AskRequest(question=CASES["figure1"]))  # warm up: imports, engine
                for scheduler in SCHEDULERS:
                    for case, question in CASES.items():
                        done = await tqa.ask(AskRequest(question=question, scheduler=scheduler))
                        results.append(
                            {
                                "scheduler": scheduler,
                                "case": case,
                                "status": done.status,
                                "rounds": done.rounds,
                                "tokens": done.usage["total_tokens"],
                                "ms_per_round": done.timing["orchestrator_s"]
                                * 1000
                                / max(done.rounds, 1),
                                "answer": (done.answer or {}).get("value"),
                            }
                        )
                # (c) what the round limit costs when the Critic never accepts: the paper's
                # 50 against the former default 12 (FSM).
                for limit in (12, 50):
                    started = time.perf_counter()
                    done = await tqa.ask(AskRequest(question=NEVER_DONE, max_rounds=limit))
                    results.append(
                        {
                            "scheduler": "limit",
                            "case": f"max_rounds={limit}",
                            "status": done.status,
                            "rounds": done.rounds,
                            "tokens": done.usage["total_tokens"],
                            "seconds": time.perf_counter() - started,
                        }
                    )
    finally:
        model.stop()
    return results


def part_b() -> None:
    print("\n(b) agents as published apps + scripted model (0 ms latency) + demo sources")
    everything = asyncio.run(pipeline())
    results = [r for r in everything if r["scheduler"] != "limit"]
    print(f"    {'scheduler':<9} {'case':<13} {'status':<10} rounds  tokens  orch ms/round  answer")
    for r in results:
        print(
            f"    {r['scheduler']:<9} {r['case']:<13} {r['status']:<10} {r['rounds']:>6}  "
            f"{r['tokens']:>6}  {r['ms_per_round']:>13.2f}  {r['answer']}"
        )
    by = {s: [r for r in results if r["scheduler"] == s] for s in SCHEDULERS}
    fsm_tokens = statistics.mean(r["tokens"] for r in by["fsm"])
    print("    tokens per question (mean over the cases), relative to the FSM:")
    for scheduler, rows in by.items():
        tokens = statistics.mean(r["tokens"] for r in rows)
        rounds = statistics.mean(r["rounds"] for r in rows)
        print(
            f"      {scheduler:<8} {tokens:8.0f} tokens  x{tokens / fsm_tokens:.2f}   "
            f"{rounds:.1f} rounds"
        )
    overheads = [r["ms_per_round"] for r in results]
    print(
        f"    orchestration per round, model and tool runs excluded: median "
        f"{statistics.median(overheads):.2f} ms (max {max(overheads):.2f}); it includes "
        "recording each turn and the run service's bookkeeping between runs"
    )
    print(f"\n(c) a question the Critic never accepts ({NEVER_DONE!r}), FSM:")
    for r in (r for r in everything if r["scheduler"] == "limit"):
        print(
            f"    {r['case']:<14} {r['status']:<11} {r['rounds']:>3} rounds  "
            f"{r['tokens']:>7} tokens  {r['seconds']:.1f} s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--skip-pipeline", action="store_true")
    args = parser.parse_args()
    part_a(args.rounds)
    if not args.skip_pipeline:
        part_b()
    return 0


if __name__ == "__main__":
    sys.exit(main())

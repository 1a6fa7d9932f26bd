"""The `dagwright` command: run and validate flow files, list blocks, run the demo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic_core import to_jsonable_python

from dagwright.cli.data import data_app
from dagwright.cli.examples import examples_app
from dagwright.cli.execution import run_plan
from dagwright.cli.inputs import fail, parse_inputs
from dagwright.cli.mock_llm import mock_llm
from dagwright.cli.server_commands import call, export, import_, serve
from dagwright.cli.tqa import tqa_app
from dagwright.errors import DagwrightError
from dagwright.registry import Registry, type_name
from dagwright.runtime import (
    CompiledFlow,
    FlowInvalidError,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    RunEvent,
    RunResult,
    analyse,
    build_trace,
    compile_flow,
    load_flow,
)

app = typer.Typer(
    name="dagwright",
    help="Build LLM applications as typed DAG flows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "flows" / "examples"


def _to_json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False, indent=2)


def _registry() -> Registry:
    try:
        return Registry.default()
    except DagwrightError as exc:
        raise fail(exc.message) from None


def _print_trace(result: RunResult, plan: CompiledFlow) -> None:
    typer.echo("\ntrace (ms since the run started):", err=True)
    header = (
        f"  {'node':<20} {'block':<16} {'status':<10} {'start':>9} {'duration':>9} {'tokens':>7}"
    )
    typer.echo(header, err=True)
    scripted = False
    for trace in build_trace(result.events, plan.blocks()).values():
        start = f"{trace.started * 1e3:9.2f}" if trace.started is not None else " " * 9
        duration = f"{trace.duration * 1e3:9.2f}" if trace.duration is not None else " " * 9
        tokens = f"{trace.usage.total_tokens:7d}" if trace.usage.calls else " " * 7
        line = (
            f"  {trace.node:<20} {trace.block or '-':<16} {trace.status:<10} {start} {duration} "
            f"{tokens}"
        )
        if trace.status in ("failed", "skipped", "cancelled") and trace.error:
            line += f"  {trace.error}"
        typer.echo(line, err=True)
        scripted |= any(m.get("scripted") for m in trace.messages if m["kind"] == "usage")
    usage = result.usage
    if usage.calls:
        label = " (scripted answers, not a model's)" if scripted else ""
        typer.echo(
            f"model calls: {usage.calls}, tokens: {usage.prompt_tokens} in + "
            f"{usage.completion_tokens} out, cost: {usage.cost:.6f}{label}",
            err=True,
        )


class _LivePrinter:
    """Prints nodes as they settle and model tokens as they stream (to stderr)."""

    def __init__(self) -> None:
        self._streaming: str | None = None  # the node whose tokens are being printed

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, NodeMessage) and event.kind == "token":
            if self._streaming != event.node:
                self._end_stream()
                typer.echo(f"  {event.node} > ", err=True, nl=False)
                self._streaming = event.node
            typer.echo(event.data["text"], err=True, nl=False)
            return
        if isinstance(event, NodeFinished | NodeSkipped | NodeFailed):
            self._end_stream()
        if isinstance(event, NodeFinished):
            typer.echo(f"  ok      {event.node} ({event.duration * 1e3:.1f} ms)", err=True)
        elif isinstance(event, NodeSkipped):
            typer.echo(f"  skipped {event.node}: {event.reason}", err=True)
        elif isinstance(event, NodeFailed):
            typer.echo(f"  failed  {event.node}: {event.error_type}: {event.message}", err=True)

    def _end_stream(self) -> None:
        if self._streaming is not None:
            typer.echo("", err=True)
            self._streaming = None


@app.command()
def run(
    flow_file: Annotated[Path, typer.Argument(help="A flow file (JSON).")],
    input_: Annotated[
        list[str] | None,
        typer.Option("--input", "-i", help="An input as key=value, or key=@file to read it."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    trace: Annotated[bool, typer.Option("--trace", help="Print per-node timings.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show nodes live.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds a node may take when its block sets none.")
    ] = None,
    record: Annotated[
        Path | None, typer.Option(help="Record every model exchange to this JSONL file.")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="Answer model calls from a recording, through the scripted server."),
    ] = None,
) -> None:
    """Run a flow file and print its outputs."""
    inputs = parse_inputs(input_ or [])
    registry = _registry()
    try:
        plan = compile_flow(load_flow(flow_file), registry)
        result = run_plan(
            plan,
            inputs,
            node_timeout=timeout,
            record=record,
            replay=replay,
            on_event=_LivePrinter() if verbose else None,
            notice=lambda message: typer.echo(f"note: {message}", err=True),
        )
    except DagwrightError as exc:
        raise fail(exc.message) from None
    if as_json:
        error = None
        if result.error is not None:
            error = {
                "code": result.error.code,
                "message": result.error.message,
                "node": result.error.node,
            }
        payload: dict[str, Any] = {
            "run_id": result.run_id,
            "status": result.status,
            "outputs": result.outputs,
            "error": error,
            "duration": result.duration,
            "usage": result.usage,
        }
        if trace:
            payload["trace"] = list(build_trace(result.events, plan.blocks()).values())
        typer.echo(_to_json(payload))
    else:
        for name, value in result.outputs.items():
            shown = value if isinstance(value, str) else _to_json(value)
            typer.echo(f"{name}: {shown}")
        if trace:
            _print_trace(result, plan)
    if result.status != "succeeded":
        assert result.error is not None
        if not as_json:
            typer.echo(f"error: run {result.status}: {result.error.message}", err=True)
        raise typer.Exit(EXIT_RUN_FAILED)


@app.command()
def validate(
    flow_file: Annotated[Path, typer.Argument(help="A flow file (JSON).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print problems as JSON.")] = False,
) -> None:
    """Check a flow file and print every problem; exits non-zero when there are errors."""
    registry = _registry()
    try:
        flow = load_flow(flow_file)
    except DagwrightError as exc:
        raise fail(exc.message) from None
    analysis = analyse(flow, registry)
    if as_json:
        typer.echo(_to_json([p.to_dict() for p in analysis.problems]))
    else:
        for problem in analysis.problems:
            typer.echo(str(problem))
        errors = sum(p.severity == "error" for p in analysis.problems)
        warnings = len(analysis.problems) - errors
        summary = "valid" if analysis.ok else "invalid"
        typer.echo(f"{flow_file}: {summary} ({errors} error(s), {warnings} warning(s))")
    if not analysis.ok:
        raise typer.Exit(EXIT_BAD_INPUT)


@app.command()
def blocks(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the registry's JSON Schema.")
    ] = False,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
) -> None:
    """List the registered blocks with their ports."""
    registry = _registry()
    specs = [s for s in registry if category is None or s.category == category]
    if as_json:
        schema = registry.to_schema()
        schema["blocks"] = [s.to_schema() for s in specs]
        typer.echo(_to_json(schema))
        return
    current = None
    for spec in specs:
        if spec.category != current:
            current = spec.category
            typer.echo(f"\n[{current}]")
        ins = ", ".join(f"{p.name}: {type_name(p.type)}" for p in spec.inputs.values())
        if spec.dynamic_ports is not None:
            ins = ", ".join(filter(None, [ins, f"**{type_name(spec.dynamic_port_type)}"]))
        outs = ", ".join(f"{p.name}: {type_name(p.type)}" for p in spec.outputs.values())
        typer.echo(f"  {spec.name:<16} ({ins}) -> {outs}")
        typer.echo(f"  {'':<16} {spec.description}")


@app.command()
def demo(
    folder: Annotated[Path, typer.Option(help="Folder of example flows.")] = EXAMPLES_DIR,
) -> None:
    """Run every example flow with its default inputs (the product's offline demo)."""
    registry = _registry()
    files = sorted(folder.glob("*.json"))
    if not files:
        raise fail(f"no flow files in {folder}")
    failures = 0
    for path in files:
        try:
            plan = compile_flow(load_flow(path), registry)
            result = run_plan(plan, {}, notice=lambda message: typer.echo(f"   note: {message}"))
        except FlowInvalidError as exc:
            failures += 1
            typer.echo(f"{path.name}: {exc.message}", err=True)
            continue
        except DagwrightError as exc:
            failures += 1
            typer.echo(f"{path.name}: error: {exc.message}", err=True)
            continue
        typer.echo(f"== {path.name}: {plan.flow.description or plan.name}")
        typer.echo(f"   {result.status} in {result.duration * 1e3:.1f} ms")
        for name, value in result.outputs.items():
            typer.echo(f"   {name}: {value if isinstance(value, str) else _to_json(value)}")
        failures += result.status != "succeeded"
    raise typer.Exit(EXIT_RUN_FAILED if failures else 0)


app.command("mock-llm")(mock_llm)
app.command()(serve)
app.command()(call)
app.command()(export)
app.command("import")(import_)
app.add_typer(examples_app, name="examples", help="Few-shot examples: load, query, list, delete.")
app.add_typer(data_app, name="data", help="Data sources, tables, SQL across them, demo data.")
app.add_typer(tqa_app, name="tqa", help="AutoTQA: agents answering questions over tables.")

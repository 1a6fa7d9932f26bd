"""The `dagwright` command: run and validate flow files, list blocks, run the demo.

Start-up is kept short (`dagwright run` of a small flow in well under a second): this module
imports only typer and the standard library at load, each command imports what it uses, and
the commands defined in other modules (serve, data, tqa...) are imported only when invoked.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from dagwright.cli.inputs import fail, parse_inputs
from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from typer._click import Command, Context  # typer's own copy of click

    from dagwright.registry import Registry
    from dagwright.runtime import CompiledFlow, RunEvent, RunResult
    from dagwright.settings import Settings

# Commands defined elsewhere, loaded when used: name -> (module, attribute, help of a group).
# A Typer attribute is a command group; a function is a single command.
LAZY_COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "mock-llm": ("dagwright.cli.mock_llm", "mock_llm", None),
    "serve": ("dagwright.cli.server_commands", "serve", None),
    "worker": ("dagwright.cli.worker", "worker", None),
    "call": ("dagwright.cli.server_commands", "call", None),
    "export": ("dagwright.cli.server_commands", "export", None),
    "import": ("dagwright.cli.server_commands", "import_", None),
    "examples": (
        "dagwright.cli.examples",
        "examples_app",
        "Few-shot examples: load, query, list, delete.",
    ),
    "data": ("dagwright.cli.data", "data_app", "Data sources, tables, SQL across them, demo data."),
    "tqa": ("dagwright.cli.tqa", "tqa_app", "AutoTQA: agents answering questions over tables."),
    "eval": ("dagwright.cli.eval", "eval_app", "Evaluation: metrics, datasets, batch runs."),
    "methods": ("dagwright.cli.methods", "methods_app", "The papers' methods as apps."),
    "mcp": ("dagwright.cli.mcp", "mcp_app", "MCP: list and call the tools of MCP servers."),
    "triggers": ("dagwright.cli.triggers", "triggers_app", "Cron schedules and webhooks."),
    "human": ("dagwright.cli.human", "human_app", "Runs waiting for a person: list, answer."),
}


def _load_command(name: str) -> Command:
    module_name, attribute, group_help = LAZY_COMMANDS[name]
    target = getattr(importlib.import_module(module_name), attribute)
    holder = typer.Typer()
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, help=group_help)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


class _LazyGroup(TyperGroup):
    """The top-level group: its own commands plus LAZY_COMMANDS, imported on first use."""

    def list_commands(self, ctx: Context) -> list[str]:
        return [*super().list_commands(ctx), *(n for n in LAZY_COMMANDS if n not in self.commands)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            self.add_command(_load_command(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="dagwright",
    help="Build LLM applications as typed DAG flows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_LazyGroup,
)

EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "flows" / "examples"


def _to_json(value: Any) -> str:
    from pydantic_core import to_jsonable_python

    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False, indent=2)


def _settings() -> Settings:
    from dagwright.settings import load_settings

    try:
        return load_settings()
    except DagwrightError as exc:
        raise fail(exc.message) from None


def _registry(settings: Settings) -> Registry:
    from dagwright.registry import Registry

    try:
        return Registry.default(settings.block_folders)
    except DagwrightError as exc:
        raise fail(exc.message) from None


def _print_trace(result: RunResult, plan: CompiledFlow) -> None:
    from dagwright.runtime import build_trace

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
        if trace.status in ("failed", "skipped", "cancelled", "waiting") and trace.error:
            line += f"  {trace.error}"
        typer.echo(line, err=True)
        scripted |= trace.usage.scripted
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
        from dagwright.runtime import (
            NodeFailed,
            NodeFinished,
            NodeMessage,
            NodeSkipped,
            NodeWaiting,
        )

        if isinstance(event, NodeMessage) and event.kind == "token":
            if self._streaming != event.node:
                self._end_stream()
                typer.echo(f"  {event.node} > ", err=True, nl=False)
                self._streaming = event.node
            typer.echo(event.data["text"], err=True, nl=False)
            return
        if isinstance(event, NodeFinished | NodeSkipped | NodeFailed | NodeWaiting):
            self._end_stream()
        if isinstance(event, NodeFinished):
            typer.echo(f"  ok      {event.node} ({event.duration * 1e3:.1f} ms)", err=True)
        elif isinstance(event, NodeSkipped):
            typer.echo(f"  skipped {event.node}: {event.reason}", err=True)
        elif isinstance(event, NodeFailed):
            typer.echo(f"  failed  {event.node}: {event.error_type}: {event.message}", err=True)
        elif isinstance(event, NodeWaiting):
            typer.echo(f"  waiting {event.node}: {event.message}", err=True)

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
    from dagwright.cli.execution import run_plan
    from dagwright.runtime import build_trace, compile_flow, load_flow

    inputs = parse_inputs(input_ or [])
    settings = _settings()
    registry = _registry(settings)
    try:
        plan = compile_flow(load_flow(flow_file), registry)
        result = run_plan(
            plan,
            inputs,
            settings,
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
    from dagwright.runtime import analyse, load_flow

    registry = _registry(_settings())
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
    from dagwright.registry import type_name

    registry = _registry(_settings())
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
    from dagwright.cli.execution import run_plan
    from dagwright.runtime import FlowInvalidError, compile_flow, load_flow

    settings = _settings()
    registry = _registry(settings)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise fail(f"no flow files in {folder}")
    failures = 0
    for path in files:
        try:
            plan = compile_flow(load_flow(path), registry)
            result = run_plan(
                plan, {}, settings, notice=lambda message: typer.echo(f"   note: {message}")
            )
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

"""Data-Copilot (Zhang et al.) as blocks. Offline: `dc_design` runs the design-test-optimise
loop over requests and stores the accepted interfaces in the source's library. Deployment
(flows/methods/data_copilot/deploy.json): `dc_library` lists the interfaces, `chat` nodes
rewrite the intent, select interfaces and plan in the paper's JSON form, `dc_plan` reads the
plan, a `repeat` runs it step by step with a `map` over each step's calls (`dc_step`,
`dc_call`, `dc_step_done`), and `dc_answer` gathers the tables and charts. The method's logic
is in dagwright.methods.data_copilot; these blocks carry JSON and reach the services.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from dagwright.registry import INTERFACES, MODELS, SANDBOX, TABLES, NodeContext, block

if TYPE_CHECKING:
    from dagwright.methods.data_copilot.interface import Interface
    from dagwright.methods.data_copilot.library import InterfaceLibrary

# Every model call here starts with a tag, so scripted models and logs can tell them apart.
TAG = "[data_copilot:{}]"
GENERATE_CODE = "generate_code"  # the plan's way to ask for raw code (the hybrid fallback)


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="A configured provider; empty: the default.")
    model: str | None = Field(None, description="Empty: the provider's default model.")


class SourceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(description="The data source whose interface library is used.")


async def _ask(ctx: NodeContext, choice: ModelChoice, tag: str, prompt: str) -> str:
    from dagwright.llm.gateway import ChatRequest

    request = ChatRequest(
        messages=[{"role": "user", "content": f"{TAG.format(tag)}\n{prompt}"}],
        model=choice.model,
        temperature=0.0,
    )
    result = await ctx.service(MODELS).chat(choice.provider, request)
    ctx.record_usage(result.usage, result.call)
    return result.choices[0]


def _library(ctx: NodeContext) -> InterfaceLibrary:

    return ctx.service(INTERFACES)


# -- offline: interface design ---------------------------------------------------------------


class ExploreOutput(TypedDict):
    requests: list[str]
    dropped: list[dict[str, Any]]


@block(
    "dc_explore_check",
    category="tool",
    description="Data-Copilot: keep the synthesized requests whose data exists (backward check).",
    example="[{request: 'GDP of China', tables: ['macro.gdp']}] -> dropped: no such table",
    needs=(TABLES,),
)
def dc_explore_check(
    config: SourceConfig, ctx: NodeContext, proposals: Any, seeds: list[str]
) -> ExploreOutput:
    """The paper's backward verification of self-explored requests: each proposal names the
    tables it needs ({"requests": [{"request", "tables"}]}); one naming a table the catalog
    lacks is hallucinated and dropped (with the reason). Returns the seeds, then the verified
    requests not already among them."""
    known = {str(ref) for ref in ctx.service(TABLES).engine().tables()}
    found = proposals.get("requests") if isinstance(proposals, dict) else None
    requests, dropped = list(seeds), []
    for proposal in found if isinstance(found, list) else []:
        request = str(proposal.get("request", "")).strip() if isinstance(proposal, dict) else ""
        tables = proposal.get("tables") if isinstance(proposal, dict) else None
        missing = [t for t in tables or [] if t not in known] if isinstance(tables, list) else []
        if not request or not tables or missing:
            reason = f"no table {', '.join(missing)}" if missing else "names no table"
            dropped.append({"request": request, "reason": reason})
        elif request not in requests:
            requests.append(request)
    for entry in dropped:
        ctx.emit("data_copilot_dropped", **entry)
    return {"requests": requests, "dropped": dropped}


class DesignConfig(SourceConfig, ModelChoice):
    max_repairs: int = Field(2, ge=0, le=5, description="Repairs of a failing interface.")
    merge_threshold: float = Field(
        0.8, ge=0, le=1, description="Cosine similarity from which a merge is considered."
    )
    sample_rows: int = Field(50, ge=1, le=10_000, description="Rows of each sampled sub-table.")
    include_uncovered: bool = Field(
        True, description="Also design for the requests the deployment could not cover."
    )


@block(
    "dc_design",
    category="tool",
    description="Data-Copilot: design, test, repair and merge interfaces for requests.",
    example="requests ['Daily cost of a tenant in January'] -> {accepted, merged, log}",
    needs=(
        MODELS,
        TABLES,
        INTERFACES,
        SANDBOX,
    ),
)
async def dc_design(
    config: DesignConfig, ctx: NodeContext, description: str, requests: list[str]
) -> dict[str, Any]:
    """For each request (and, unless turned off, each logged uncovered request) the model
    designs interfaces; each is run on sampled sub-tables of the source (its test cases, in
    the sandbox) and repaired from the error until it passes or `max_repairs` is spent; then
    the most similar library interfaces (embedding cosine) are offered for a merge, and a
    merged interface replaces both only if it passes the tests of both. The library is saved
    as new versions. Returns the library's signatures and the log of every step."""
    from dagwright.methods.data_copilot import design as loop
    from dagwright.methods.data_copilot.interface import call

    library = _library(ctx)
    engine = ctx.service(TABLES).engine()
    gateway = ctx.service(MODELS)
    sandbox = ctx.service(SANDBOX)
    pending = library.uncovered(config.source) if config.include_uncovered else []
    all_requests = [*requests, *(p["request"] for p in pending)]

    async def ask(tag: str, prompt: str) -> str:
        return await _ask(ctx, config, tag, prompt)

    async def embed(texts: list[str]) -> list[list[float]]:
        result = await gateway.embed(config.provider, texts)
        ctx.record_usage(result.usage, result.call)
        return result.vectors

    async def try_(interface: Interface, args: dict[str, Any]) -> Any:
        return await ctx.table_work(
            call, interface, args, engine, sandbox, sample_rows=config.sample_rows
        )

    settings = loop.DesignSettings(config.max_repairs, config.merge_threshold)
    before = library.interfaces(config.source)
    report = await loop.design(all_requests, description, before, ask, embed, try_, settings)
    merged = {entry["into"] for entry in report.log if entry["step"] == "merged"}
    library.replace(config.source, report.library, {name: "merged" for name in merged})
    library.mark_designed([p["id"] for p in pending])
    for entry in report.log:
        ctx.emit("data_copilot", **entry)
    return {
        "interfaces": [i.signature() for i in report.library],
        "accepted": [e["interface"] for e in report.log if e["step"] == "accepted"],
        "merged": [e for e in report.log if e["step"] == "merged"],
        "rejected": [e["interface"] for e in report.log if e["step"] == "rejected"],
        "log": report.log,
    }


# -- deployment ------------------------------------------------------------------------------


class LibraryOutput(TypedDict):
    interfaces: list[dict[str, Any]]
    catalogue: str
    today: str


@block(
    "dc_library",
    category="tool",
    description="Data-Copilot: the source's interfaces, described for the planner.",
    example="source 'billing' -> {interfaces, catalogue: '- cost_by_service(...) -> table'}",
    needs=(INTERFACES,),
)
def dc_library(config: SourceConfig, ctx: NodeContext, today: str = "") -> LibraryOutput:
    """Lists the interfaces in use for the source (with the built-in `plot_chart` and
    `generate_code`), and today's date (`today`, else the server's) for the intent rewrite."""
    from dagwright.methods.data_copilot.design import describe
    from dagwright.methods.data_copilot.plan import PLOT_INPUTS

    interfaces = _library(ctx).interfaces(config.source)
    builtin = (
        f"\n- plot_chart({', '.join(PLOT_INPUTS)}) -> chart: a Vega-Lite chart of a result "
        "(mark: bar, line, point, area or arc)"
        f"\n- {GENERATE_CODE}(task, data) -> table: Python code written for a task no "
        "interface covers (data: an earlier result, or null)"
        "\n- loop(entities, function, arg...) -> table: function(entity, arg...) for each "
        "entity (a list, or an earlier result's first column), in parallel; the tables "
        "joined, each row with its `entity`"
    )
    return {
        "interfaces": [i.model_dump(mode="json") for i in interfaces],
        "catalogue": describe(interfaces) + builtin,
        "today": today or datetime.date.today().isoformat(),
    }


class PlanOutput(TypedDict):
    state: dict[str, Any]
    steps: list[list[dict[str, Any]]]


@block(
    "dc_plan",
    category="tool",
    description="Data-Copilot: read a workflow plan (step1={...}, step2={...} ###).",
    example='step1={"arg1": ["2024-01-01"], "function1": "cost_by_day", "output1": "result1"}',
)
def dc_plan(
    config: SourceConfig,
    ctx: NodeContext,
    plan: str,
    interfaces: list[dict[str, Any]],
    request: str,
    selection: Any = None,
) -> PlanOutput:
    """Parses the plan into steps of parallel calls and checks that later steps only use
    earlier outputs. A call to a function the library lacks becomes `generate_code` for its
    description (the paper's interface-code hybrid), and the request is logged as uncovered
    — as it is when the selection reported a part no interface covers — for the next design
    round. Returns the execution's starting state and the steps."""
    from dagwright.methods.data_copilot.plan import LOOP, PLOT, parse

    steps = parse(plan)
    known = {i["name"] for i in interfaces} | {PLOT, GENERATE_CODE}
    uncovered = str((selection or {}).get("uncovered") or "") if isinstance(selection, dict) else ""
    known.add(LOOP)
    for calls in steps:
        for index, found in enumerate(calls):
            looped = (
                found["args"][1] if found["function"] == LOOP and len(found["args"]) > 1 else None
            )
            if looped is not None and looped not in known:
                uncovered = uncovered or f"no interface {looped}"
            if found["function"] not in known:
                uncovered = uncovered or f"no interface {found['function']}"
                task = found["description"] or f"{found['function']}({found['args']})"
                calls[index] = {**found, "function": GENERATE_CODE, "args": [task, None]}
    if uncovered or any(c["function"] == GENERATE_CODE for s in steps for c in s):
        _library(ctx).log_uncovered(config.source, request, uncovered or "code generated")
        ctx.emit("data_copilot_uncovered", request=request, reason=uncovered)
    return {"state": {"steps": steps, "index": 0, "results": {}}, "steps": steps}


class StepOutput(TypedDict):
    calls: list[dict[str, Any]]
    results: dict[str, Any]


@block(
    "dc_step",
    category="tool",
    description="Data-Copilot: the calls of the current step (they run in parallel).",
    example="{steps, index: 1, results} -> the second step's calls",
    inline=True,
)
def dc_step(config: SourceConfig, state: dict[str, Any]) -> StepOutput:
    """The current step's calls — a `loop` expanded into one call per entity — and the
    results so far, for a `map` over the calls."""
    from dagwright.methods.data_copilot.plan import expand

    calls = expand(state["steps"][state["index"]], state["results"])
    return {"calls": calls, "results": dict(state["results"])}


class StepDone(TypedDict):
    state: dict[str, Any]
    done: bool


@block(
    "dc_step_done",
    category="tool",
    description="Data-Copilot: add a step's results to the state; done after the last step.",
    example="outputs of step 1 -> {state: {index: 1, results: {result1: ...}}, done: false}",
    inline=True,
)
def dc_step_done(config: SourceConfig, state: dict[str, Any], outputs: list[Any]) -> StepDone:
    """Stores each call's result under its output name; a failed call fails the workflow
    with its error, so a wrong plan is not reported as an answer."""
    from dagwright.methods.data_copilot.plan import StepFailedError, join_loops

    failed = [f"{found['function']}: {found['error']}" for found in outputs if found.get("error")]
    if failed:
        raise StepFailedError(f"step {state['index'] + 1} failed: " + "; ".join(failed))
    results = {**state["results"], **join_loops(outputs)}
    index = state["index"] + 1
    new_state = {**state, "index": index, "results": results}
    return {"state": new_state, "done": index >= len(state["steps"])}


class CallConfig(SourceConfig, ModelChoice):
    max_rows: int = Field(100_000, ge=1, description="Rows read from each table.")


@block(
    "dc_call",
    category="tool",
    description="Data-Copilot: run one planned call (an interface, a chart, or generated code).",
    example='{function: "cost_by_day", args: ["2024-01-01"], output: "result1"} -> rows',
    needs=(TABLES, SANDBOX),  # and the models for a `generate_code` step
)
async def dc_call(
    config: CallConfig,
    ctx: NodeContext,
    call: dict[str, Any],
    results: dict[str, Any],
    interfaces: list[dict[str, Any]],
) -> dict[str, Any]:
    """Runs an interface in the sandbox over the source's tables (earlier outputs passed for
    their names), makes a chart for `plot_chart`, or — for `generate_code` — asks the model
    for code for the task and runs it in the sandbox. Returns {output, function, kind (table
    or chart), value, error}; a failure is returned, not raised, so the step reports all."""
    from dagwright.methods.data_copilot.interface import Interface, InterfaceError
    from dagwright.methods.data_copilot.plan import PLOT, PLOT_INPUTS, named_args

    function = call["function"]
    base = {"output": call["output"], "function": function, "error": None}
    if "loop" in call:
        base["loop"] = call["loop"]
    try:
        if function == PLOT:
            args = named_args(call, PLOT_INPUTS, results)
            return {**base, "kind": "chart", "value": _plot(args)}
        if function == GENERATE_CODE:
            args = named_args(call, ("task", "data"), results)
            table = await _generated(ctx, config, str(args.get("task")), args.get("data"))
            return {**base, "kind": "table", "value": table}
        found = next((i for i in interfaces if i["name"] == function), None)
        if found is None:
            raise InterfaceError(f"the library has no interface {function!r}")
        interface = Interface.model_validate(found)
        args = named_args(call, [i.name for i in interface.inputs], results)
        table = await _run(ctx, interface, args, config.max_rows)
        return {**base, "kind": "table", "value": table}
    except Exception as exc:  # reported per call: the step shows every failure
        return {**base, "kind": "error", "value": None, "error": f"{type(exc).__name__}: {exc}"}


async def _run(
    ctx: NodeContext, interface: Interface, args: dict[str, Any], max_rows: int
) -> list[dict[str, Any]]:
    from dagwright.methods.data_copilot.interface import call, table_records

    engine = ctx.service(TABLES).engine()
    sandbox = ctx.service(SANDBOX)
    table = await ctx.table_work(call, interface, args, engine, sandbox, max_rows=max_rows)
    return table_records(table)


def _plot(args: dict[str, Any]) -> dict[str, Any]:
    from dagwright.charts import chart

    data = args.get("data")
    if not isinstance(data, list):
        raise ValueError("plot_chart's data must be an earlier result (a table)")
    return chart(
        data,
        str(args.get("mark") or "line"),
        str(args["x"]),
        str(args["y"]),
        args.get("color") or None,
        args.get("title") or None,
    )


async def _generated(
    ctx: NodeContext, config: CallConfig, task: str, data: Any
) -> list[dict[str, Any]]:
    """The hybrid fallback: code written by the model for a task, run in the sandbox over
    the source's tables (and `data`, an earlier result, as the DataFrame `data`)."""
    from dagwright.methods.data_copilot.design import parse_json
    from dagwright.methods.data_copilot.interface import Interface

    # Every registered table is offered: a library's data may span several sources (the
    # billing demo spans PostgreSQL, MariaDB and Parquet).
    schema = "\n".join(str(ref) for ref in ctx.service(TABLES).engine().tables())
    answer = await _ask(
        ctx,
        config,
        "code",
        "No interface covers this task; write a Python function for it. Answer JSON: "
        '{"name", "description", "inputs": [] (or [{"name": "data", "type": "table"}] when it '
        'uses the earlier result), "tables": [qualified names it reads], "code"}.\n'
        f"###Task: {task}\n###Tables:\n{schema}\n###Earlier result: "
        f"{'columns ' + ', '.join(data[0]) if isinstance(data, list) and data else 'none'}",
    )
    interface = Interface.model_validate(parse_json(answer))
    args = {"data": data} if any(i.name == "data" for i in interface.inputs) else {}
    return await _run(ctx, interface, args, config.max_rows)


class AnswerOutput(TypedDict):
    answer: dict[str, Any]
    digest: str


@block(
    "dc_answer",
    category="tool",
    description="Data-Copilot: the workflow's tables and charts, and a digest for the summary.",
    example="final state -> {answer: {tables, charts}, digest: 'result1: 31 rows ...'}",
    inline=True,
)
def dc_answer(config: SourceConfig, state: dict[str, Any]) -> AnswerOutput:
    """Tables (by output name) and charts (Vega-Lite specs) from every step, plus a short
    digest of them (columns, row counts, first rows) for the summary's prompt."""
    from dagwright.charts import is_chart

    tables: dict[str, Any] = {}
    charts: list[dict[str, Any]] = []
    for name, value in state["results"].items():
        if is_chart(value):
            charts.append(value)
        else:
            tables[name] = value
    lines = []
    for name, rows in tables.items():
        columns = ", ".join(rows[0]) if rows else "(no columns)"
        lines.append(f"{name}: {len(rows)} row(s); columns {columns}; first rows {rows[:3]}")
    lines += [f"chart: {c.get('title', c['mark'])}" for c in charts]
    return {
        "answer": {"tables": tables, "charts": charts, "steps": state["steps"]},
        "digest": "\n".join(lines),
    }

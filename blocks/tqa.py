"""AutoTQA's blocks: `autotqa_ask` (a flow with it can be published, so the whole agent group
answers behind one endpoint), `autotqa_execute` (the Executor agent's flow: it chooses the
tool app the Engineer asked for and calls it) and `python_code` (the Python tool's sandboxed
program)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.errors import DagwrightError
from dagwright.registry import APPS, AUTOTQA, SANDBOX, ModelCall, NodeContext, Usage, block


class AskConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scheduler: Literal["fsm", "llm", "rolling"] = Field(
        "fsm", description="Who speaks next: the state machine, a model, or a fixed rotation."
    )
    max_rounds: int = Field(50, ge=1, le=100, description="Agent turns before giving up.")
    dataset: str | None = Field(
        None, description="The TQA dataset (profile): its SOP, examples and hints."
    )
    sop: str = Field("", description="Added to the dataset's standard operating procedure.")
    sources: list[str] = Field(
        default_factory=list,
        description="The data sources the question may use ('source', or 'source.schema' for "
        "one schema of it); the SQL engine refuses any other table. Empty: the dataset's "
        "sources (none: every source). The `sources` input narrows it further.",
    )
    answer_format: str | None = Field(
        None, description="A format to fill (Jinja2 over the answer's fields)."
    )


class AskOutput(TypedDict):
    answer: Any
    text: str
    status: str
    conversation_id: str
    evidence: list[dict[str, Any]]


@block(
    "autotqa_ask",
    category="invoke",
    description="Answer a question over the registered tables with the AutoTQA agents.",
    example="'What is the year-end bonus for Tom?' -> answer 1569, with the SQL and rows",
    needs=(AUTOTQA,),
)
async def autotqa_ask(
    config: AskConfig, ctx: NodeContext, question: str, sources: list[str] | None = None
) -> AskOutput:
    """Runs a whole AutoTQA conversation (Planner, Engineer, Executor, Critic under the
    chosen scheduler) and returns its answer, the answer as text, how it ended (`completed`,
    `round_limit`, `failed`: only `completed` carries an answer), the conversation's id (GET
    /api/v1/tqa/conversations/{id} shows every turn) and the evidence (SQL and rows). The
    question reads only the tables of its scope: the `sources` setting, narrowed by the
    `sources` input (a source outside the setting is an error naming it); unknown sources
    are an error too."""
    scope = _ask_scope(config.sources, sources)
    request = {"question": question, **config.model_dump(), "sources": scope}
    done = await ctx.service(AUTOTQA).ask_question(request)
    _record_agents_usage(ctx, done.get("usage"))
    answer = done.get("answer") or {}
    error = done.get("error") or {}
    return {
        "answer": answer.get("value"),
        "text": str(answer.get("text") or error.get("message") or ""),
        "status": str(done.get("status")),
        "conversation_id": str(done.get("id")),
        "evidence": list(answer.get("evidence") or []),
    }


def _ask_scope(configured: list[str], given: list[str] | None) -> list[str] | None:
    """The question's scope: the setting's, narrowed by the input's (None: the dataset's)."""
    from dagwright.data.scope import ScopeError, SourceScope

    allowed = SourceScope.parse(configured, field="sources (config)")
    asked = SourceScope.parse(given, field="sources (input)")
    if allowed is None or asked is None:
        chosen = allowed or asked
        return None if chosen is None else chosen.entries
    outside = [
        entry for entry in asked.entries if not allowed.narrowed(SourceScope.parse([entry])).sources
    ]
    if outside:
        raise ScopeError(
            f"sources (input): {', '.join(outside)} lie outside this node's sources ({allowed})"
        )
    narrowed = allowed.narrowed(asked)
    return narrowed.entries


def _record_agents_usage(ctx: NodeContext, spent: dict[str, Any] | None) -> None:
    """The conversation's agents ran as runs of their own (not children of this one): what
    they spent is this node's, so that the run, and an evaluation of its app, count it."""
    if not spent:
        return
    usage = Usage.from_dict(spent)
    if usage.total_tokens or usage.cost or usage.calls:
        ctx.record_usage(usage, ModelCall(scripted=bool(spent.get("scripted"))))


class ExecuteOutput(TypedDict):
    tool: str | None
    app: str | None
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    error: dict[str, str] | None


@block(
    "autotqa_execute",
    category="invoke",
    description="AutoTQA's Executor: call the tool app the Engineer asked for; a failure "
    "comes back on `error`.",
    example="request {tool: text_to_sql, input: {}} -> the tool's rows, SQL and error",
    needs=(APPS,),
)
async def autotqa_execute(
    ctx: NodeContext,
    request: dict[str, Any],
    tools: dict[str, Any],
    context: dict[str, Any] | None = None,
) -> ExecuteOutput:
    """Chooses the app of the tool the Engineer's `request` ({tool, input}) names among the
    registered `tools` ({name: {app, role}}), fills the inputs the Engineer left out as the
    tool's role declares from the `context` (question, hints, feedback of the failed
    attempt, few-shot examples, the dataset's sources) and calls the app (a child run: open
    it from this run's trace). A tool that is not registered or whose run fails comes back
    on `error` ({code, message}), so the Engineer can correct its request; a failure the
    tool reports itself is in its `outputs`."""
    # Imported here: every process loads this module, few run AutoTQA (`dagwright run`).
    from dagwright.tqa.executor import choose_tool
    from dagwright.tqa.ports import ExecutorInputs

    try:
        given = ExecutorInputs.read(request, tools, context)
        choice = choose_tool(given.request, given.tools, given.context)
    except DagwrightError as exc:
        return {"tool": None, "app": None, "inputs": {}, "outputs": {}, "error": _failure(exc)}
    try:
        outputs = await ctx.service(APPS).invoke(
            choice.app, None, choice.inputs, parent_run_id=ctx.run_id, parent_node=ctx.node_id
        )
    except DagwrightError as exc:
        error = _failure(exc)
        return {
            "tool": choice.tool,
            "app": choice.app,
            "inputs": choice.inputs,
            "outputs": {},
            "error": error,
        }
    return {
        "tool": choice.tool,
        "app": choice.app,
        "inputs": choice.inputs,
        "outputs": outputs,
        "error": None,
    }


def _failure(exc: DagwrightError) -> dict[str, str]:
    return {"code": exc.code, "message": exc.message}


class PythonCodeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: str = Field(
        "df",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$",
        description="The DataFrame's name in the code.",
    )
    cpu_s: int = Field(10, ge=1, le=600, description="CPU seconds allowed.")
    wall_s: float = Field(20, gt=0, le=1200, description="Wall-clock seconds allowed.")
    memory_mb: int = Field(
        1024, ge=64, le=16384, description="Memory allowed, in MB (at most the server's ceiling)."
    )

    @field_validator("memory_mb")
    @classmethod
    def _within_ceiling(cls, value: int) -> int:
        from dagwright.data.sandbox_budget import check_memory_mb

        return check_memory_mb(value)


class PythonCodeOutput(TypedDict):
    result: Any
    stdout: str
    error: dict[str, str] | None


@block(
    "python_code",
    category="tool",
    description="Run Python (pandas) given as an input on a table, in the sandbox; a failure "
    "comes back on `error`.",
    example="code 'result = int(df.Bonus.sum())', rows [{Bonus: 2100}, {Bonus: 1569}] -> 3669",
    needs=(SANDBOX,),
)
async def python_code(
    config: PythonCodeConfig,
    ctx: NodeContext,
    code: str,
    rows: list[dict[str, Any]],
    upstream_error: str | None = None,
) -> PythonCodeOutput:
    """Like `python_on_tables`, but the code is an input (written by a model: AutoTQA's
    Engineer), so it runs in the same isolated process — no network, a scratch folder, none
    of the server's environment, CPU, wall-clock and memory limits. The rows are a pandas
    DataFrame named by `table`; `result` is what the node gives. A failure (or an
    `upstream_error`, e.g. of the query that fetched the rows) is given on `error`, so the
    caller can correct the code and retry. The failure is `{code, message}`."""
    from dagwright.tqa.ports import reported_failure

    upstream = reported_failure(upstream_error)
    if upstream is not None:
        error = {"code": upstream["code"], "message": upstream["message"]}
        return {"result": None, "stdout": "", "error": error}
    import pyarrow as pa

    from dagwright.data.engine import json_value
    from dagwright.data.sandbox import SandboxLimits, run_python
    from dagwright.errors import DataError

    limits = SandboxLimits(cpu_s=config.cpu_s, wall_s=config.wall_s, memory_mb=config.memory_mb)
    try:
        frame = pa.Table.from_pylist(rows)
        sandbox = ctx.service(SANDBOX)
        outcome = await ctx.table_work(
            run_python, code, {config.table: frame}, limits=limits, settings=sandbox
        )
    except DataError as exc:
        return {"result": None, "stdout": "", "error": _failure(exc)}
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        return {
            "result": None,
            "stdout": "",
            "error": {"code": "table_invalid", "message": str(exc)},
        }
    result = outcome.result
    if isinstance(result, pa.Table):
        result = [{k: json_value(v) for k, v in row.items()} for row in result.to_pylist()]
    return {"result": result, "stdout": outcome.stdout, "error": None}

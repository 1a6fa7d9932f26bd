"""Chain-of-Table (Wang et al., ICLR 2024) as blocks, step for step as its official
implementation runs: `cot_table` makes the state, and each round of a `repeat` runs
`cot_plan` (DynamicPlan: the next operation), `cot_args` (GenerateArgs: sampled answers,
parsed and voted on) and `cot_apply` (the operation on the table); `cot_query_prompt` and
`cot_answer` frame the final Query. The algorithm itself is in dagwright.methods.chain_of_table;
these blocks only call the model and carry JSON between nodes, so every intermediate table,
vote and chain step is in the run's trace.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from dagwright.registry import MODELS, TABLES, NodeContext, block

if TYPE_CHECKING:
    from dagwright.methods.chain_of_table.actions import State
    from dagwright.methods.chain_of_table.arguments import Scored

# The official ChatGPT wrapper's system message (utils/llm.py), sent with every prompt.
SYSTEM = (
    "I will give you some examples, you need to follow the examples and complete the text, "
    "and no other content."
)
Task = Literal["tabfact", "wikitq", "fetaqa"]


class Decoding(BaseModel):
    """How one step samples the model (the paper's Tables 7-9)."""

    model_config = ConfigDict(extra="forbid")

    # top_p is 1.0 in every step of the paper: the API's default, so it is not sent.
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(200, ge=1)
    n_samples: int = Field(1, ge=1, le=16)
    n_demos: int | None = Field(None, ge=0, description="Empty: every official demo.")


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="A configured provider; empty: the default.")
    model: str | None = Field(None, description="Empty: the provider's default model.")
    logprobs: bool = Field(
        True,
        description="Weigh votes by the answers' log-probabilities; off (or a provider that "
        "sends none): by rank, as the official ChatGPT wrapper does.",
    )


async def _ask(
    ctx: NodeContext, model: ModelChoice, decoding: Decoding, prompt: str, stop: str | None
) -> Scored:
    """One call for `n_samples` answers, each with its log-probability."""
    from dagwright.llm.gateway import ChatRequest
    from dagwright.methods.chain_of_table.arguments import answer_scores

    request = ChatRequest(
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
        model=model.model,
        temperature=decoding.temperature,
        max_tokens=decoding.max_tokens,
        stop=[stop] if stop else None,
        n=decoding.n_samples,
        logprobs=model.logprobs,
    )
    result = await ctx.service(MODELS).chat(model.provider, request)
    ctx.record_usage(result.usage, result.call)
    logprobs: list[float | None] = [None] * len(result.choices)
    if model.logprobs:
        logprobs = result.logprobs
    return answer_scores(result.choices, logprobs)


# -- the state -------------------------------------------------------------------------------------


class TableConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_rows: int = Field(10_000, ge=1, description="Rows read from a named table.")


@block(
    "cot_table",
    category="tool",
    description="Chain-of-Table: the starting state from a table (records, rows, or a name).",
    example="rows [['Rank', 'Country'], ['1', 'ESP']] -> {table, act_chain: [], ...}",
)
async def cot_table(
    config: TableConfig,
    ctx: NodeContext,
    table: str | None = None,
    rows: Any = None,
    caption: str | None = None,
) -> dict[str, Any]:
    """The table is `rows` — records (a list of row dicts) or a header-first list of rows —
    or else `table`, the name of a registered table (source.schema.table) read through the
    data layer. Every cell becomes text, as the paper's tables are."""
    from dagwright.methods.chain_of_table.actions import initial_state
    from dagwright.methods.chain_of_table.table import table_from_records, table_from_rows

    given: Any = rows if rows not in (None, "", []) else table
    if isinstance(given, str) and given.strip():
        table = given
        engine = ctx.service(TABLES).engine()
        result = await ctx.table_work(engine.sample, table, config.max_rows)
        rows = table_from_records(result.records())
        if not result.records():
            rows = [[column.name for column in result.columns]]
    elif isinstance(given, list) and given and isinstance(given[0], dict):
        rows = table_from_records(given)
    elif isinstance(given, list) and given:
        rows = table_from_rows(given)
    else:
        raise ValueError("give `rows` (records or a header-first list of rows) or `table` (a name)")
    return dict(initial_state(rows, caption or None))


# -- DynamicPlan -----------------------------------------------------------------------------------


class PlanConfig(ModelChoice):
    decoding: Decoding = Field(default_factory=Decoding)


class PlanOutput(TypedDict):
    operation: str  # add_column ... sort_column, or <END>
    candidates: list[str]
    prompt: str | None  # None: one candidate was left, no model call
    response: str | None


@block(
    "cot_plan",
    category="llm",
    description="Chain-of-Table DynamicPlan: the next operation (or <END>) for the table.",
    example="state after f_select_row -> {operation: 'select_column', candidates: [...]}",
    needs=(MODELS,),
)
async def cot_plan(config: PlanConfig, ctx: NodeContext, state: Any, question: str) -> PlanOutput:
    """Offers the operations the official state machine allows after the chain so far (each
    at most once, in order; skipped ones not again). With one candidate left the model is
    not asked; otherwise it continues the chain and only the first allowed operation it
    proposes is kept (none: <END>)."""
    from dagwright.methods.chain_of_table import planning

    candidates = planning.candidates(state["act_chain"])
    if len(candidates) == 1:
        return {
            "operation": candidates[0],
            "candidates": candidates,
            "prompt": None,
            "response": None,
        }
    prompt = planning.plan_prompt(
        state["table"], question, state["act_chain"], config.decoding.n_demos
    )
    answers = await _ask(ctx, config, config.decoding, prompt, stop="\n\n")
    response = answers[0][0]
    return {
        "operation": planning.choose(response, candidates),
        "candidates": candidates,
        "prompt": prompt,
        "response": response,
    }


# -- GenerateArgs ----------------------------------------------------------------------------------


def _sampled(temperature: float, n: int, demos: int) -> Decoding:
    return Decoding(temperature=temperature, n_samples=n, n_demos=demos)


class ArgsConfig(ModelChoice):
    """Defaults: the paper's TabFact settings (Table 8)."""

    add_column: Decoding = Field(default_factory=lambda: _sampled(0.0, 1, 7))
    select_row: Decoding = Field(default_factory=lambda: _sampled(0.5, 8, 4))
    select_column: Decoding = Field(default_factory=lambda: _sampled(0.5, 8, 8))
    group_column: Decoding = Field(default_factory=lambda: _sampled(0.0, 1, 2))
    sort_column: Decoding = Field(default_factory=lambda: _sampled(0.0, 1, 2))


class ArgsOutput(TypedDict):
    operation: str
    arguments: list[Any]  # the ranked arguments: [[argument, confidence], ...]
    answers: list[list[Any]]  # [[text, log-probability], ...] of the main call
    reason: str | None  # why no argument came out, when none did
    calls: int


async def _add_column(
    config: ArgsConfig, ctx: NodeContext, state: State, question: str
) -> ArgsOutput:
    from dagwright.methods.chain_of_table import arguments as args

    table, caption = state["table"], state["caption"]
    decoding = config.add_column
    prompt = args.add_column_prompt(table, question, caption, decoding.n_demos)
    # The official call is always one sample.
    answers = await _ask(ctx, config, decoding.model_copy(update={"n_samples": 1}), prompt, None)
    out: ArgsOutput = {
        "operation": "add_column",
        "arguments": [],
        "answers": [list(a) for a in answers],
        "reason": None,
        "calls": 1,
    }
    first = args.add_column_first(answers[0][0])
    if first is None:
        out["reason"] = "the answer gave no f_add_column(name) with three values"
        return out
    column, values = first
    if column in table[0]:
        out["reason"] = f"the table already has a column {column!r}"
        return out
    prompts = args.add_column_row_prompts(table, caption, answers[0][0])
    if prompts is None:
        out["reason"] = "the answer has no explanation to continue for the other rows"
        return out
    # Rows after the third, one greedy call each (the official llm.generate defaults).
    single = Decoding(temperature=0.0, max_tokens=150)
    rest = await asyncio.gather(*(_ask(ctx, config, single, p, None) for p in prompts))
    contents = values + [args.add_column_value(r[0][0]) for r in rest]
    # The official confidence of the pick: its first answer's probability.
    out["arguments"] = [[[column, contents], math.exp(answers[0][1])]]
    out["calls"] += len(prompts)
    return out


@block(
    "cot_args",
    category="llm",
    description="Chain-of-Table GenerateArgs: sample the operation's arguments and vote.",
    example="select_row, 8 samples -> [[['1', '3'], 5.2], [['1'], 1.1]]",
    needs=(MODELS,),
)
async def cot_args(
    config: ArgsConfig, ctx: NodeContext, state: Any, question: str, operation: str
) -> ArgsOutput:
    """Asks the model with the operation's official prompt and decoding settings and parses
    the answers: rows and columns are voted on over several samples, each weighted by its
    probability; group-by keeps only a column whose values repeat (distinct ratio <= 0.8);
    sort parses numbers (empty cells last) and drops a column already in order; add-column
    fills the remaining rows one call each. <END> asks nothing."""
    from dagwright.methods.chain_of_table import arguments as args

    if operation == "add_column":
        return await _add_column(config, ctx, state, question)
    out: ArgsOutput = {
        "operation": operation,
        "arguments": [],
        "answers": [],
        "reason": None,
        "calls": 0,
    }
    if operation == "<END>":
        return out
    table, caption = state["table"], state["caption"]
    if operation == "select_row":
        decoding = config.select_row
        prompt = args.select_row_prompt(table, question, caption, decoding.n_demos)
    elif operation == "select_column":
        decoding = config.select_column
        prompt = args.select_column_prompt(table, question, caption, decoding.n_demos)
    elif operation == "group_column":
        decoding = config.group_column
        prompt = args.group_column_prompt(table, question, caption, decoding.n_demos)
    elif operation == "sort_column":
        decoding = config.sort_column
        prompt = args.sort_column_prompt(table, question, decoding.n_demos)
    else:
        raise ValueError(f"unknown Chain-of-Table operation {operation!r}")
    answers = await _ask(ctx, config, decoding, prompt, None)
    out["answers"] = [list(a) for a in answers]
    out["calls"] = 1
    if operation == "select_row":
        out["arguments"] = args.select_row_vote(answers)
    elif operation == "select_column":
        out["arguments"] = args.select_column_vote(answers)
    elif operation == "group_column":
        out["arguments"] = args.group_column_vote(answers, table)
    else:
        out["arguments"] = args.sort_column_vote(answers, table)
    return out


# -- applying the operation ------------------------------------------------------------------------


class ApplyOutput(TypedDict):
    state: dict[str, Any]
    done: bool  # the plan said <END>
    table: list[dict[str, str]]  # the table after this operation, as records
    chain: list[str]  # the operation chain so far (skipped operations included)


@block(
    "cot_apply",
    category="tool",
    description="Chain-of-Table: apply the voted arguments to the table (or skip, with why).",
    example="select_row [['1', '3']] -> the table's rows 1 and 3; chain += f_select_row(...)",
    inline=True,
)
def cot_apply(
    ctx: NodeContext,
    state: Any,
    operation: str,
    arguments: list[Any],
    reason: str | None = None,
) -> ApplyOutput:
    """Runs the operation as the official `*_act` functions: rows and columns are the union
    of the two best-voted selections; group-by records the groups for the final query; sort
    applies only to a Numerical column; add-column's values are checked (not all equal, none
    empty, not an existing column, taken from one column). An operation that fails a check
    leaves the table unchanged as `skip f_<op>()` with the reason. The table after the step
    is shown in the debug panel (a `table` event) and given on `table`."""
    from dagwright.methods.chain_of_table import actions
    from dagwright.methods.chain_of_table.table import records_of

    ranked = arguments
    current: State = state
    if operation == "<END>":
        new = current
    elif operation == "add_column":
        column, values = ranked[0][0] if ranked else (None, None)
        new = actions.add_column(current, column, values)
        if not ranked and reason:
            new["steps"][-1]["reason"] = reason
    elif operation == "select_row":
        new = actions.select_row(current, ranked)
    elif operation == "select_column":
        new = actions.select_column(current, ranked)
    elif operation == "group_column":
        new = actions.group_column(current, ranked)
    elif operation == "sort_column":
        new = actions.sort_column(current, ranked)
    else:
        raise ValueError(f"unknown Chain-of-Table operation {operation!r}")
    records = records_of(new["table"])
    if operation != "<END>":
        step = new["steps"][-1]
        ctx.emit(
            "table",
            operation=step["act"],
            reason=step["reason"],
            columns=list(new["table"][0]),
            rows=new["table"][1:],
        )
    return {
        "state": dict(new),
        "done": operation == "<END>",
        "table": records,
        "chain": list(new["act_chain"]),
    }


# -- the final query -------------------------------------------------------------------------------


class QueryPromptConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Task = Field("tabfact", description="Which benchmark's query prompt.")
    n_demos: int | None = Field(None, ge=0, description="Empty: the official demos.")


@block(
    "cot_query_prompt",
    category="tool",
    description="Chain-of-Table: the final Query prompt over the last table (and its groups).",
    example="state, 'which country had the most cyclists?' -> '/*\\ncol : ...\\nThe answer is:'",
    inline=True,
)
def cot_query_prompt(config: QueryPromptConfig, state: Any, question: str) -> str:
    """The prompt of the final query: the last table in PIPE encoding, the group table when
    the chain grouped, the statement or question, and 'The answer is:'."""
    from dagwright.methods.chain_of_table.query import query_prompt

    return query_prompt(config.task, state, question, config.n_demos)


class AnswerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: Task = "tabfact"


class AnswerOutput(TypedDict):
    answer: str
    chain: list[str]  # the operation chain that led to the last table


@block(
    "cot_answer",
    category="tool",
    description="Chain-of-Table: read the final answer (TabFact: yes or no).",
    example="' YES' -> 'yes'",
    inline=True,
)
def cot_answer(config: AnswerConfig, text: str, state: Any) -> AnswerOutput:
    """TabFact: the lowercased answer, true/false read as yes/no (the official reading);
    WikiTQ and FeTaQA: the answer without its closing period. `chain` is the operation
    chain, with the final query, as the paper shows it."""
    from dagwright.methods.chain_of_table.query import read_answer

    chain = [*state["act_chain"], "f_query()"]
    return {"answer": read_answer(config.task, text), "chain": chain}

"""The AutoTQA orchestrator: a service (not a DAG) that keeps the shared conversation and
lets the agents take turns as the scheduler decides, until the Critic says the question is
answered (TERMINATE) or the round limit is reached (`round_limit`, never an answer).

- Planner, Engineer and Critic are published apps called through an `AgentCaller`; the
  Executor is this module: it runs the tool the Engineer asked for (a published app from the
  tool registry) and records the SQL and rows.
- Retry (section 4.4): an Executor error or an empty result goes back to the Engineer with
  "common knowledge": the dataset's stored hints and hints checked against the data. The
  refine-and-retry loop is the conversation itself (Executor -> Engineer -> Executor...),
  bounded by the round limit: a DAG has no cycles, so the tool flow runs once per call.
- Failures are turns: an agent that fails or answers what cannot be parsed gets a turn with
  its error, and the scheduler goes on; three failing turns in a row end the conversation
  (`failed`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dagwright.tqa.agents import AGENT_APPS, AgentCaller, AgentCallError
from dagwright.tqa.answers import build_answer
from dagwright.tqa.conversation import (
    CRITIC,
    ENGINEER,
    EXECUTOR,
    PLANNER,
    USER,
    AskRequest,
    Conversation,
    SchedulerChoice,
    ToolCall,
    Turn,
)
from dagwright.tqa.hints import GENERAL_HINTS, empty_result_hints, error_hints
from dagwright.tqa.schedulers import make_scheduler, wants_tool

if TYPE_CHECKING:
    from dagwright.tabular import TableAccess
    from dagwright.tqa.store import ConversationStore
    from dagwright.tqa.tools import Tool

TurnCallback = Callable[[Turn], Awaitable[None] | None]
TEXT_TO_SQL_APP = "autotqa-text-to-sql"
MAX_FAILED_TURNS = 3
ROWS_SHOWN = 20


def _now() -> datetime:
    return datetime.now(UTC)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "/").replace("\n", " ")[:80]


def rows_text(
    columns: Sequence[str], rows: Sequence[Mapping[str, Any]], limit: int = ROWS_SHOWN
) -> str:
    """Rows for a prompt (Chain-of-Table's PIPE encoding)."""
    names = list(columns) or list(dict.fromkeys(k for row in rows for k in row))
    lines = ["col : " + " | ".join(names)]
    for index, row in enumerate(rows[:limit], start=1):
        lines.append(f"row {index} : " + " | ".join(_cell(row.get(n)) for n in names))
    if len(rows) > limit:
        lines.append(f"({len(rows) - limit} more rows)")
    return "\n".join(lines)


def tool_text(call: ToolCall) -> str:
    parts = [f"tool {call.tool} with {json.dumps(call.input, default=str)}"]
    if call.sql:
        parts.append(f"SQL: {call.sql}")
    if call.error is not None:
        parts.append(f"ERROR {call.error.get('code')}: {call.error.get('message')}")
    else:
        if call.sql is not None or call.rows:
            parts.append(f"{call.row_count} row(s){' (truncated)' if call.truncated else ''}:")
            parts.append(rows_text(call.columns, call.rows))
        if call.outputs:
            parts.append(f"outputs: {json.dumps(call.outputs, default=str)[:2000]}")
    if call.empty:
        parts.append("The result is EMPTY: the filter values may be spelt differently.")
    if call.hints:
        parts.append("Common knowledge: " + " ".join(f"- {h}" for h in call.hints))
    return "\n".join(parts)


def render_conversation(conversation: Conversation) -> str:
    """The conversation as the agents read it."""
    lines = []
    for turn in conversation.turns:
        text = turn.text
        if turn.error is not None and turn.agent != EXECUTOR:
            text = f"(failed: {turn.error.get('code')}: {turn.error.get('message')}) {text}"
        lines.append(f"[{turn.seq}] {turn.agent}: {text}")
    return "\n".join(lines)


class Orchestrator:
    """Runs conversations. `tools` and `hints` are read once per conversation (callables,
    so the registry and the hint store stay in the database); `tables` checks hints against
    the data; `store` records the conversation as it goes (None: in memory only)."""

    def __init__(
        self,
        caller: AgentCaller,
        *,
        tools: Callable[[], Sequence[Tool]],
        hints: Callable[[str], Sequence[str]] | None = None,
        tables: TableAccess | None = None,
        store: ConversationStore | None = None,
    ) -> None:
        self.caller = caller
        self._tools = tools
        self._hints = hints
        self._tables = tables
        self._store = store

    async def _persist(self, method: Callable[..., None], *args: Any) -> None:
        if self._store is not None:
            await asyncio.to_thread(method, *args)

    async def begin(self, request: AskRequest, conversation_id: str | None = None) -> Conversation:
        """A new conversation, recorded (without turns) before anything runs."""
        conversation = Conversation(conversation_id or uuid.uuid4().hex, request, _now())
        if self._store is not None:
            await self._persist(self._store.create, conversation)
        return conversation

    async def ask(
        self,
        request: AskRequest,
        on_turn: TurnCallback | None = None,
        conversation: Conversation | None = None,
    ) -> Conversation:
        """Runs the conversation to its end (`begin` it first to know its id early)."""
        if conversation is None:
            conversation = await self.begin(request)
        started = time.perf_counter()
        tools = {tool.name: tool for tool in await asyncio.to_thread(self._tools)}
        stored_hints: list[str] = []
        if request.dataset and self._hints is not None:
            stored_hints = list(await asyncio.to_thread(self._hints, request.dataset))
        scheduler = make_scheduler(request.scheduler, self.caller, render_conversation)
        state = _State(conversation, tools, stored_hints, started)

        async def emit(turn: Turn) -> None:
            conversation.turns.append(turn)
            if self._store is not None:
                await self._persist(self._store.add_turn, conversation.id, turn)
            if on_turn is not None:
                result = on_turn(turn)
                if inspect.isawaitable(result):
                    await result

        user_text = request.question + (f"\nSOP:\n{request.sop}" if request.sop else "")
        await emit(Turn(0, USER, user_text, {"question": request.question, "sop": request.sop}))
        agent_time = 0.0
        failures = 0
        try:
            while True:
                if conversation.rounds >= request.max_rounds:
                    conversation.status = "round_limit"
                    conversation.error = {
                        "code": "round_limit",
                        "message": f"no answer after {request.max_rounds} rounds: the Critic "
                        "never judged the question answered",
                    }
                    break
                turn_started = time.perf_counter()
                choice = await scheduler.choose(conversation)
                scheduling = time.perf_counter() - turn_started
                conversation.rounds += 1
                turn = await self._act(choice, state)
                turn.scheduler = choice
                turn.started = turn_started - started
                turn.duration = time.perf_counter() - turn_started
                agent_time += turn.agent_time + (scheduling if choice.by == "llm" else 0.0)
                await emit(turn)
                failures = failures + 1 if turn.error is not None and turn.agent != EXECUTOR else 0
                if failures >= MAX_FAILED_TURNS:
                    conversation.status = "failed"
                    conversation.error = {
                        "code": "agents_failing",
                        "message": f"{failures} agent turns in a row failed; the last: "
                        f"{turn.error}",
                    }
                    break
                verdict = turn.content if turn.agent == CRITIC and turn.error is None else None
                if isinstance(verdict, dict) and verdict.get("complete") is True:
                    conversation.status = "completed"
                    conversation.answer = build_answer(
                        verdict, state.evidence(), request.answer_format
                    )
                    break
        except asyncio.CancelledError:
            conversation.status = "failed"
            conversation.error = {"code": "cancelled", "message": "the conversation was cancelled"}
            raise
        finally:
            conversation.finished_at = _now()
            total = time.perf_counter() - started
            conversation.timing = {
                "total_s": total,
                "agents_s": agent_time,
                "orchestrator_s": max(total - agent_time, 0.0),
            }
            if self._store is not None:
                await asyncio.shield(self._persist(self._store.finish, conversation))
        return conversation

    # -- the agents ---------------------------------------------------------------------------

    async def _act(self, choice: SchedulerChoice, state: _State) -> Turn:
        seq = len(state.conversation.turns)
        if choice.agent == PLANNER:
            return await self._planner(seq, state)
        if choice.agent == ENGINEER:
            return await self._engineer(seq, state)
        if choice.agent == EXECUTOR:
            return await self._executor(seq, state)
        return await self._critic(seq, state)

    async def _model_turn(
        self, seq: int, agent: str, inputs: dict[str, Any], output: str, state: _State
    ) -> tuple[Turn, Any]:
        request = state.conversation.request
        try:
            reply = await self.caller.call(
                AGENT_APPS[agent], inputs, time_limit=request.agent_timeout_s
            )
        except AgentCallError as exc:
            turn = Turn(seq, agent, "", error={"code": exc.code, "message": exc.message})
            turn.run_id = exc.run_id
            return turn, None
        value = reply.outputs.get(output)
        turn = Turn(seq, agent, "", usage=reply.usage, run_id=reply.run_id)
        turn.agent_time = reply.duration
        return turn, value

    async def _planner(self, seq: int, state: _State) -> Turn:
        request = state.conversation.request
        turn, plan = await self._model_turn(
            seq,
            PLANNER,
            {
                "question": request.question,
                "sop": request.sop,
                "conversation": render_conversation(state.conversation),
            },
            "plan",
            state,
        )
        if turn.error is None:
            turn.text = str(plan)
            turn.content = {"plan": str(plan)}
        return turn

    async def _engineer(self, seq: int, state: _State) -> Turn:
        request = state.conversation.request
        turn, decision = await self._model_turn(
            seq,
            ENGINEER,
            {
                "question": request.question,
                "tools": "\n".join(f"- {t.name}: {t.description}" for t in state.tools.values()),
                "hints": "\n".join(f"- {h}" for h in state.engineer_hints()),
                "conversation": render_conversation(state.conversation),
            },
            "decision",
            state,
        )
        if turn.error is not None:
            return turn
        turn.content = decision
        turn.text = json.dumps(decision, default=str)
        problem = self._check_decision(decision, state)
        if problem is not None:
            turn.error = {"code": "agent_output", "message": problem}
        elif isinstance(decision, dict) and isinstance(decision.get("input"), str):
            decision["input"] = {"question": decision["input"]}
        return turn

    @staticmethod
    def _check_decision(decision: Any, state: _State) -> str | None:
        if not isinstance(decision, dict):
            return f"the Engineer's answer is not a JSON object: {str(decision)[:200]}"
        action = decision.get("action")
        if action == "report":
            return None
        if action != "tool":
            return f"the Engineer's action must be 'tool' or 'report', not {action!r}"
        tool = decision.get("tool")
        if tool not in state.tools:
            known = ", ".join(state.tools) or "none registered"
            return f"the Engineer asked for tool {tool!r}; the tools are: {known}"
        if not isinstance(decision.get("input", {}), dict | str):
            return "the tool's input must be a JSON object"
        return None

    async def _executor(self, seq: int, state: _State) -> Turn:
        request = state.conversation.request
        asked = state.pending_tool_call()
        if asked is None:
            return Turn(seq, EXECUTOR, "No tool call was asked for: nothing to run.")
        decision: dict[str, Any] = asked.content
        tool = state.tools[str(decision["tool"])]
        given = decision.get("input") or {}
        inputs: dict[str, Any] = dict(given) if isinstance(given, dict) else {"question": given}
        if tool.app == TEXT_TO_SQL_APP:
            inputs.setdefault("question", request.question)
            inputs.setdefault("hints", "\n".join(f"- {h}" for h in state.engineer_hints()))
            inputs.setdefault("feedback", state.feedback(tool.name))
        call = ToolCall(tool.name, tool.app, inputs)
        turn = Turn(seq, EXECUTOR, "", tool_call=call)
        try:
            reply = await self.caller.call(tool.app, inputs, time_limit=request.tool_timeout_s)
        except AgentCallError as exc:
            code = "tool_timeout" if exc.code == "agent_timeout" else exc.code
            call.error = {"code": code, "message": exc.message}
            call.run_id = turn.run_id = exc.run_id
        else:
            turn.agent_time, turn.usage = reply.duration, reply.usage
            call.run_id = turn.run_id = reply.run_id
            self._read_outputs(call, reply.outputs)
        if call.error is not None or call.empty:
            started = time.perf_counter()
            call.hints = await self._hints_for(call, state)
            turn.agent_time += time.perf_counter() - started  # queries, not orchestration
        turn.text = tool_text(call)
        return turn

    @staticmethod
    def _read_outputs(call: ToolCall, outputs: Mapping[str, Any]) -> None:
        rest = dict(outputs)
        rows = rest.pop("rows", None)
        call.sql = rest.pop("sql", None)
        rest.pop("executed_sql", None)
        error = rest.pop("error", None)
        call.columns = list(rest.pop("columns", None) or [])
        call.truncated = bool(rest.pop("truncated", False))
        call.rows = list(rows) if isinstance(rows, list) else []
        call.row_count = int(rest.pop("row_count", len(call.rows)) or 0)
        if error:
            code, _, message = str(error).partition(": ")
            call.error = (
                {"code": code, "message": message}
                if message and code.replace("_", "").isalpha()
                else {"code": "tool_error", "message": str(error)}
            )
        call.outputs = rest or None

    async def _hints_for(self, call: ToolCall, state: _State) -> list[str]:
        found: list[str] = []
        if self._tables is not None and call.sql:
            engine = await asyncio.to_thread(self._tables.engine)
            if call.error is not None:
                found = await asyncio.to_thread(
                    error_hints, engine, call.sql, str(call.error.get("message", ""))
                )
            else:
                found = await asyncio.to_thread(empty_result_hints, engine, call.sql)
        general = [h for h in GENERAL_HINTS if call.empty or call.error is not None]
        return list(dict.fromkeys([*found, *state.stored_hints, *general]))

    async def _critic(self, seq: int, state: _State) -> Turn:
        request = state.conversation.request
        turn, verdict = await self._model_turn(
            seq,
            CRITIC,
            {
                "question": request.question,
                "answer_format": request.answer_format or "",
                "conversation": render_conversation(state.conversation),
            },
            "verdict",
            state,
        )
        if turn.error is not None:
            return turn
        if isinstance(verdict, dict) and "complete" not in verdict:
            summary = str(verdict.get("summary", ""))
            verdict["complete"] = "TERMINATE" in summary.upper()
        turn.content = verdict
        turn.text = json.dumps(verdict, default=str)
        if not isinstance(verdict, dict) or not isinstance(verdict.get("complete"), bool):
            turn.error = {
                "code": "agent_output",
                "message": f"the Critic's answer has no 'complete': {turn.text[:200]}",
            }
        return turn


class _State:
    """What the agents of one conversation share besides the turns."""

    __slots__ = ("conversation", "started", "stored_hints", "tools")

    def __init__(
        self,
        conversation: Conversation,
        tools: dict[str, Tool],
        stored_hints: list[str],
        started: float,
    ) -> None:
        self.conversation = conversation
        self.tools = tools
        self.stored_hints = stored_hints
        self.started = started

    def pending_tool_call(self) -> Turn | None:
        """The Engineer's latest tool request, if no Executor turn has run it yet."""
        for turn in reversed(self.conversation.turns):
            if turn.agent == EXECUTOR and turn.tool_call is not None:
                return None
            if turn.agent == ENGINEER:
                return turn if wants_tool(turn) else None
        return None

    def calls(self) -> list[ToolCall]:
        return [t.tool_call for t in self.conversation.turns if t.tool_call is not None]

    def evidence(self) -> list[ToolCall]:
        """The successful tool calls with results: the latest first is what answers."""
        done = [c for c in self.calls() if c.ok and not c.empty]
        return done[-1:] if done else []

    def engineer_hints(self) -> list[str]:
        """Stored hints, and those of the last tool call when it failed or found nothing."""
        calls = self.calls()
        last = calls[-1] if calls else None
        extra = last.hints if last is not None and (not last.ok or last.empty) else []
        return list(dict.fromkeys([*extra, *self.stored_hints]))

    def feedback(self, tool: str) -> str:
        """The previous call of this tool, when it failed or found nothing."""
        calls = [c for c in self.calls() if c.tool == tool]
        if not calls:
            return ""
        last = calls[-1]
        if last.error is not None:
            return f"SQL: {last.sql}\nError: {last.error.get('code')}: {last.error.get('message')}"
        if last.empty:
            return f"SQL: {last.sql}\nThe query returned no rows."
        return ""

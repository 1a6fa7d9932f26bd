"""The AutoTQA orchestrator: a service (not a DAG) that keeps the shared conversation and
lets the agents take turns as the scheduler decides, until the Critic says the question is
answered (TERMINATE) or the round limit is reached (`round_limit`, never an answer).

- Every agent is a published app called through an `AgentCaller`: Planner, Engineer and
  Critic are model calls; the Executor (`autotqa-executor`) chooses the tool app the
  Engineer asked for and calls it. This module keeps the turns and records the SQL and rows.
- Knowledge (`knowledge.py`): the dataset's SOP, its hints (written, and learned ones like
  this question) and few-shot examples retrieved per question for each agent and tool.
- Retry (section 4.4): an Executor error or an empty result goes back to the Engineer with
  "common knowledge": the dataset's hints and hints checked against the data. The
  refine-and-retry loop is the conversation itself (Executor -> Engineer -> Executor...),
  bounded by the round limit: a DAG has no cycles, so the tool flow runs once per call. A
  retry that succeeds is recorded as a candidate hint of the dataset (`learning.py`).
- Termination (Figure 5): the Critic's complete verdict is written as the report followed by
  TERMINATE, and a turn ending so ends the conversation.
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

from dagwright.data.scope import SourceScope
from dagwright.errors import DagwrightError
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
from dagwright.tqa.failures import (
    AgentOutputError,
    AgentsFailing,
    ApprovalPending,
    ConversationCancelled,
    RoundLimitReached,
    failure,
)
from dagwright.tqa.hints import GENERAL_HINTS, empty_result_hints, error_hints
from dagwright.tqa.knowledge import KnowledgeSource
from dagwright.tqa.ports import ExecutorOutputs, ToolContext, ToolEntry, ToolRequest, ToolResult
from dagwright.tqa.roles import ToolRole, tool_role
from dagwright.tqa.schedulers import TERMINATE, make_scheduler, terminated, wants_tool

if TYPE_CHECKING:
    from dagwright.tabular import TableAccess
    from dagwright.tqa.approvals import ApprovalDesk
    from dagwright.tqa.recording import ConversationStore, Deferral
    from dagwright.tqa.tools import Tool

TurnCallback = Callable[[Turn], Awaitable[None] | None]
EXECUTOR_APP = "autotqa-executor"
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
        parts.append(f"ERROR {call.error['code']}: {call.error['message']}")
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


def _user_turn(conversation: Conversation) -> Turn:
    """Turn 0: the question, with the sources and the SOP the agents follow."""
    request, knowledge = conversation.request, conversation.knowledge
    text = request.question
    if knowledge.sources:
        text += f"\nData sources: {', '.join(knowledge.sources)}"
    if knowledge.sop:
        text += f"\nSOP:\n{knowledge.sop}"
    content = {"question": request.question, "sop": knowledge.sop, "dataset": request.dataset}
    return Turn(0, USER, text, content)


def _failures_in_a_row(turns: Sequence[Turn]) -> int:
    """How many agent turns failed in a row at the end of `turns` (an Executor's turn, failed
    or not, ends a row: a tool's error is the Engineer's to read, not an agent failing)."""
    count = 0
    for turn in reversed(turns):
        if turn.agent == EXECUTOR or turn.error is None:
            break
        count += 1
    return count


def render_conversation(conversation: Conversation) -> str:
    """The conversation as the agents read it."""
    lines = []
    for turn in conversation.turns:
        text = turn.text
        if turn.error is not None and turn.agent != EXECUTOR:
            text = f"(failed: {turn.error['code']}: {turn.error['message']}) {text}"
        lines.append(f"[{turn.seq}] {turn.agent}: {text}")
    return "\n".join(lines)


class Orchestrator:
    """Runs conversations. `tools` is read once per conversation (a callable, so the
    registry stays in the database); `knowledge` gives each conversation its dataset's SOP,
    hints and examples and records what it learned; `tables` checks hints against the data;
    `store` records the conversation as it goes (None: in memory only); `approvals` asks a
    person before a tool that requires approval runs (None: such tools run unasked)."""

    def __init__(
        self,
        caller: AgentCaller,
        *,
        tools: Callable[[], Sequence[Tool]],
        knowledge: KnowledgeSource | None = None,
        tables: TableAccess | None = None,
        store: ConversationStore | None = None,
        approvals: ApprovalDesk | None = None,
    ) -> None:
        self.caller = caller
        self._tools = tools
        self.knowledge = knowledge or KnowledgeSource()
        self._tables = tables
        self._store = store
        self._approvals = approvals

    async def _persist(self, method: Callable[..., None], *args: Any) -> None:
        if self._store is not None:
            await asyncio.to_thread(method, *args)

    async def begin(
        self,
        request: AskRequest,
        conversation_id: str | None = None,
        defer: Deferral | None = None,
        replica: str | None = None,
        foreground: bool = False,
    ) -> Conversation:
        """A new conversation with its knowledge, recorded (without turns) before anything
        runs; `defer` queues its job in the transaction that records it (queue mode);
        `replica`: the lease of the server process that runs it; `foreground`: its caller
        waits for the answer (tqa/recovery.py ends it, not resumes it, if that process dies)."""
        conversation = Conversation(conversation_id or uuid.uuid4().hex, request, _now())
        conversation.runner = uuid.uuid4().hex
        conversation.replica = replica
        conversation.foreground = foreground
        conversation.knowledge = await self.knowledge.gather(request)
        if self._store is not None:
            await self._persist(self._store.create, conversation, defer)
        return conversation

    async def ask(
        self,
        request: AskRequest,
        on_turn: TurnCallback | None = None,
        conversation: Conversation | None = None,
    ) -> Conversation:
        """Runs the conversation to its end (`begin` it first to know its id early), or
        until a tool call waits for a person's approval (status `waiting`). A conversation
        loaded with recorded turns (tqa/durable.py) goes on after its last turn: finished
        turns are kept, the turn that was under way when its process stopped is taken again."""
        if conversation is None:
            conversation = await self.begin(request, foreground=True)
        conversation.status = "running"
        last = conversation.last()
        # A resumed conversation's clock goes on from where its last recorded turn ended.
        offset = last.started + last.duration if last is not None else 0.0
        started = time.perf_counter() - offset
        tools = {tool.name: tool for tool in await asyncio.to_thread(self._tools)}
        scheduler = make_scheduler(request.scheduler, self.caller, render_conversation)
        state = _State(conversation, tools, list(conversation.knowledge.hints), started)

        def emit(turn: Turn) -> Awaitable[None]:
            return self._emit(conversation, turn, on_turn)

        if not conversation.turns:
            await emit(_user_turn(conversation))
        agent_time = 0.0
        failures = _failures_in_a_row(conversation.turns)
        try:
            while True:
                if _out_of_rounds(conversation):
                    break
                turn_started = time.perf_counter()
                choice = await scheduler.choose(conversation)
                scheduling = time.perf_counter() - turn_started
                try:
                    turn = await self._act(choice, state)
                except ApprovalPending:
                    conversation.status = "waiting"
                    break
                conversation.rounds += 1
                turn.scheduler = choice
                turn.started = turn_started - started
                turn.duration = time.perf_counter() - turn_started
                agent_time += turn.agent_time + (scheduling if choice.by == "llm" else 0.0)
                await emit(turn)
                failures = failures + 1 if turn.error is not None and turn.agent != EXECUTOR else 0
                if _ended(turn, failures, state):
                    break
        except asyncio.CancelledError:
            if conversation.handed_over_on_stop and not conversation.cancel_requested:
                # Its worker is stopping: left running as recorded, another resumes it.
                conversation.status = "running"
                raise
            conversation.status = "failed"
            conversation.error = ConversationCancelled("the conversation was cancelled").failure()
            raise
        finally:
            if conversation.status != "running":
                await self._record_end(conversation, time.perf_counter() - started, agent_time)
        if conversation.status != "waiting":
            await self._learn(conversation)
        return conversation

    async def _emit(
        self, conversation: Conversation, turn: Turn, on_turn: TurnCallback | None
    ) -> None:
        conversation.turns.append(turn)
        if self._store is not None:
            await self._persist(self._store.add_turn, conversation, turn)
        if on_turn is not None:
            result = on_turn(turn)
            if inspect.isawaitable(result):
                await result

    async def _record_end(self, conversation: Conversation, total: float, agents: float) -> None:
        """How the conversation ended (or that it waits), recorded even when cancelled."""
        if conversation.status != "waiting":
            conversation.finished_at = _now()
        conversation.timing = {
            "total_s": total,
            "agents_s": agents,
            "orchestrator_s": max(total - agents, 0.0),
        }
        if self._store is not None:
            await asyncio.shield(self._persist(self._store.finish, conversation))

    async def _learn(self, conversation: Conversation) -> None:
        """Records the lessons of the conversation's successful retries (candidate hints)."""
        learned = await self.knowledge.learn(conversation)
        if learned and conversation.profile is not None:
            conversation.profile["learned"] = [hint["id"] for hint in learned]
            if self._store is not None:
                await self._persist(self._store.finish, conversation)

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
        self,
        seq: int,
        agent: str,
        inputs: dict[str, Any],
        output: str,
        state: _State,
        examples: tuple[str, str],
    ) -> tuple[Turn, Any]:
        """Calls the agent's app with `inputs` plus the few-shot examples of `examples`
        (role, query) picked from the dataset's namespace."""
        request = state.conversation.request
        role, query = examples
        try:
            inputs["examples"] = await self.knowledge.examples(
                state.conversation.knowledge, role, query
            )
        except DagwrightError as exc:
            return Turn(seq, agent, "", error=failure(exc)), None
        try:
            reply = await self.caller.call(
                AGENT_APPS[agent], inputs, time_limit=request.agent_timeout_s
            )
        except AgentCallError as exc:
            turn = Turn(seq, agent, "", error=failure(exc))
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
                "sop": state.conversation.sop,
                "conversation": render_conversation(state.conversation),
            },
            "plan",
            state,
            ("planner", request.question),
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
            ("engineer", request.question),
        )
        if turn.error is not None:
            return turn
        turn.content = decision
        turn.text = json.dumps(decision, default=str)
        try:
            _check_decision(decision, state)
        except AgentOutputError as exc:
            turn.error = exc.failure()
        return turn

    async def _executor(self, seq: int, state: _State) -> Turn:
        """The Executor's turn: its app chooses the tool the Engineer asked for and calls it
        (given the conversation's context for the built-in tools); the turn records the call,
        its SQL and rows, or its error with the hints for a retry. A call that needs approval
        waits for it (ApprovalPending); a tool that plans is first called to write its plan,
        which the request shows, and runs the approved plan as it is."""
        asked = state.pending_tool_call()
        if asked is None:
            return Turn(seq, EXECUTOR, "No tool call was asked for: nothing to run.")
        wanted = ToolRequest.model_validate(asked.content)
        tool = state.tools[wanted.tool]
        given = wanted.input
        call = ToolCall(tool.name, tool.app, dict(given) if isinstance(given, dict) else {})
        turn = Turn(seq, EXECUTOR, "", tool_call=call)
        role = tool_role(tool.role)
        if tool.requires_approval and self._approvals is not None:
            # ApprovalPending until a person answers: the conversation waits.
            verdict = await self._approvals.verdict(state.conversation, asked.seq, tool)
            if verdict is None:
                plan = None
                if role.plans:
                    await self._call(_planned(wanted, role, {"mode": "write"}), state, call, turn)
                    plan = _written_plan(call)
                    if plan is None:  # it could not write one: the Engineer's to read
                        return await self._done(call, turn, state)
                await self._approvals.ask(
                    state.conversation, asked.seq, tool, given, plan, call.run_id
                )
            turn.content = {"approval": verdict.to_dict()}
            if not verdict.approved:
                call.error = {"code": "tool_rejected", "message": verdict.message}
                turn.text = tool_text(call)
                return turn
            if role.plans and verdict.plan is not None:
                wanted = _planned(wanted, role, {"mode": "plan", "plan": verdict.plan})
        await self._call(wanted, state, call, turn)
        return await self._done(call, turn, state)

    async def _call(self, wanted: ToolRequest, state: _State, call: ToolCall, turn: Turn) -> None:
        """Calls the tool through the Executor's app; records its outputs or its failure
        on `call` (and the run and its cost on `turn`)."""
        request = state.conversation.request
        tool = state.tools[wanted.tool]
        role = tool_role(tool.role)
        given = wanted.input
        context = ToolContext(
            question=request.question,
            hints="\n".join(f"- {h}" for h in state.engineer_hints()),
            feedback=state.feedback(tool.name),
            sources=list(state.conversation.knowledge.sources),
        )
        try:
            if role.examples is not None:
                query = given.get(role.text_input) if isinstance(given, dict) else given
                context.examples = await self.knowledge.examples(
                    state.conversation.knowledge, role.examples, str(query or request.question)
                )
            reply = await self.caller.call(
                EXECUTOR_APP,
                {
                    "request": wanted.model_dump(),
                    "tools": {
                        t.name: ToolEntry(app=t.app, role=t.role).model_dump()
                        for t in state.tools.values()
                    },
                    "context": context.model_dump(exclude_none=True),
                },
                time_limit=request.tool_timeout_s,
            )
        except AgentCallError as exc:
            call.error = failure(exc)
            if exc.code == "agent_timeout":
                call.error["code"] = "tool_timeout"
            call.run_id = turn.run_id = exc.run_id
        except DagwrightError as exc:  # the examples could not be retrieved
            call.error = failure(exc)
        else:
            turn.agent_time, turn.usage = turn.agent_time + reply.duration, reply.usage
            call.run_id = turn.run_id = reply.run_id
            executed = ExecutorOutputs.model_validate(reply.outputs)
            call.input = executed.inputs or call.input
            _record_result(call, ToolResult.read(executed.outputs))
            if executed.error is not None:
                call.error = executed.error

    async def _done(self, call: ToolCall, turn: Turn, state: _State) -> Turn:
        """The turn's text, with hints for a retry when the call failed or found nothing."""
        if call.error is not None or call.empty:
            started = time.perf_counter()
            call.hints = await self._hints_for(call, state)
            turn.agent_time += time.perf_counter() - started  # queries, not orchestration
        turn.text = tool_text(call)
        return turn

    async def _hints_for(self, call: ToolCall, state: _State) -> list[str]:
        found: list[str] = []
        if self._tables is not None and call.sql:
            engine = await asyncio.to_thread(self._tables.engine)
            # The hints read the data too: under the question's scope, or they would describe
            # (and sample values of) the very tables the engine refused.
            scope = SourceScope.parse(state.conversation.knowledge.sources)
            if call.error is not None:
                found = await asyncio.to_thread(
                    error_hints, engine, call.sql, call.error["message"], scope
                )
            else:
                found = await asyncio.to_thread(empty_result_hints, engine, call.sql, 5, scope)
        general = [h for h in GENERAL_HINTS if call.empty or call.error is not None]
        return list(dict.fromkeys([*found, *state.stored_hints, *general]))

    async def _critic(self, seq: int, state: _State) -> Turn:
        """The Critic's verdict, written in the paper's form (Figure 5): when complete, the
        report (the Engineer's, reiterated) followed by TERMINATE; otherwise the gaps for the
        Planner. The structured verdict is the turn's content."""
        request = state.conversation.request
        report = state.last_report()
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
            ("critic", report or request.question),
        )
        if turn.error is not None:
            return turn
        if isinstance(verdict, dict) and "complete" not in verdict:
            said = f"{verdict.get('summary', '')} {verdict.get('report', '')}"
            verdict["complete"] = TERMINATE in said.upper()
        turn.content = verdict
        if not isinstance(verdict, dict) or not isinstance(verdict.get("complete"), bool):
            turn.text = json.dumps(verdict, default=str)
            problem = AgentOutputError(f"the Critic's answer has no 'complete': {turn.text[:200]}")
            turn.error = problem.failure()
            return turn
        if verdict["complete"]:
            said = str(verdict.get("report") or verdict.get("summary") or report or "")
            said = said.replace(TERMINATE, "").strip().lstrip(":.- ").strip()
            said = said or str(verdict.get("answer"))
            verdict["report"] = said
            turn.text = f"{said}\n{TERMINATE}"
        else:
            gaps = verdict.get("gaps") or ["(the Critic named no gap)"]
            lines = gaps if isinstance(gaps, list) else [gaps]
            turn.text = "GAPS for the Planner:\n" + "\n".join(f"- {g}" for g in lines)
        return turn


def _out_of_rounds(conversation: Conversation) -> bool:
    """Whether the round limit is reached (recorded on the conversation)."""
    limit = conversation.request.max_rounds
    if conversation.rounds < limit:
        return False
    conversation.status = "round_limit"
    conversation.error = RoundLimitReached(
        f"no answer after {limit} rounds: the Critic never judged the question answered"
    ).failure()
    return True


def _ended(turn: Turn, failures: int, state: _State) -> bool:
    """Whether `turn` ends the conversation (recorded on it): the last of too many failing
    agent turns in a row, or the Critic's TERMINATE."""
    conversation = state.conversation
    if failures >= MAX_FAILED_TURNS:
        conversation.status = "failed"
        conversation.error = AgentsFailing(
            f"{failures} agent turns in a row failed; the last: {turn.error}"
        ).failure()
        return True
    if terminated(turn):
        conversation.status = "completed"
        conversation.answer = build_answer(
            turn.content, state.evidence(), conversation.request.answer_format
        )
        return True
    return False


def _check_decision(decision: Any, state: _State) -> None:
    """Raises AgentOutputError when the Engineer's decision cannot be acted on."""
    if not isinstance(decision, dict):
        raise AgentOutputError(f"the Engineer's answer is not a JSON object: {str(decision)[:200]}")
    action = decision.get("action")
    if action == "report":
        return
    if action != "tool":
        raise AgentOutputError(f"the Engineer's action must be 'tool' or 'report', not {action!r}")
    tool = decision.get("tool")
    if tool not in state.tools:
        known = ", ".join(state.tools) or "none registered"
        raise AgentOutputError(f"the Engineer asked for tool {tool!r}; the tools are: {known}")
    if not isinstance(decision.get("input", {}), dict | str):
        raise AgentOutputError("the tool's input must be a JSON object")


def _planned(wanted: ToolRequest, role: ToolRole, extra: dict[str, Any]) -> ToolRequest:
    """The Engineer's request to a tool that plans, with the orchestrator's `mode` (and
    `plan`) in place of any the Engineer gave: a plan runs only once it is approved."""
    given = wanted.input
    inputs = {role.text_input: given} if isinstance(given, str) else dict(given)
    inputs.pop("plan", None)
    return ToolRequest(tool=wanted.tool, input={**inputs, **extra})


def _written_plan(call: ToolCall) -> dict[str, Any] | None:
    """The plan a tool wrote (`mode` 'write'): its checked SQL and its program; None (the
    call's error set) when it wrote none."""
    code = (call.outputs or {}).get("code")
    if call.error is None and (not call.sql or not isinstance(code, str) or not code.strip()):
        call.error = {
            "code": "tool_error",
            "message": "the tool wrote no SQL and program for a person to approve",
        }
    if call.error is not None:
        return None
    return {"sql": call.sql, "code": code}


def _record_result(call: ToolCall, result: ToolResult) -> None:
    call.sql, call.columns, call.rows = result.sql, result.columns, result.rows
    call.row_count, call.truncated = result.row_count, result.truncated
    call.error = result.error
    call.outputs = result.rest or None


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

    def last_report(self) -> str | None:
        """The Engineer's latest report, if it has reported since the last tool call."""
        for turn in reversed(self.conversation.turns):
            if turn.agent == EXECUTOR:
                return None
            content = turn.content
            if turn.agent == ENGINEER:
                reported = isinstance(content, dict) and content.get("action") == "report"
                return str(content.get("report") or "") if reported and not turn.error else None
        return None

    def feedback(self, tool: str) -> str:
        """The previous call of this tool, when it failed or found nothing."""
        calls = [c for c in self.calls() if c.tool == tool]
        if not calls:
            return ""
        last = calls[-1]
        code = (last.outputs or {}).get("code")
        tried = f"SQL: {last.sql}" + (f"\nCode: {code}" if code else "")
        if last.error is not None:
            return f"{tried}\nError: {last.error['code']}: {last.error['message']}"
        if last.empty:
            return f"{tried}\nThe query returned no rows."
        return ""

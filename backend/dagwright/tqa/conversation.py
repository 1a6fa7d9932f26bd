"""The shared conversation of the AutoTQA agents: turns (who spoke, what, the scheduler's
choice that led there, the tool call with its SQL and rows, tokens, timing), the request
that started it and how it ended. Plain data, JSON-ready through `to_dict`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.data.scope import MAX_SCOPE_ENTRIES, ScopeError, SourceScope
from dagwright.tqa.failures import Failure
from dagwright.tqa.knowledge import Knowledge

USER, PLANNER, ENGINEER, EXECUTOR, CRITIC = "User", "Planner", "Engineer", "Executor", "Critic"
AGENTS = (USER, PLANNER, ENGINEER, EXECUTOR, CRITIC)
# Who a scheduler may pick: the User only submits the question.
SCHEDULABLE = (PLANNER, ENGINEER, EXECUTOR, CRITIC)
SchedulerName = Literal["fsm", "llm", "rolling"]
# waiting: a tool call awaits a person's approval (tqa/approvals.py); the others are final.
Status = Literal["running", "waiting", "completed", "round_limit", "failed"]
FINAL: tuple[Status, ...] = ("completed", "round_limit", "failed")

DESCRIPTIONS = {
    USER: "submits the question (and the dataset's SOP); never scheduled again",
    PLANNER: "decomposes the question into fine-grained steps following the SOP; revises "
    "the plan when the Critic lists gaps",
    ENGINEER: "refines the next step of the plan and asks the Executor for a tool call "
    "(text-to-SQL...), or reports what the results show",
    EXECUTOR: "runs the tool the Engineer asked for (SQL across every source) and returns "
    "its rows or its error",
    CRITIC: "judges whether the question is completely answered: TERMINATE with the final "
    "answer, or the gaps for the Planner",
}


class AskRequest(BaseModel):
    """A question for AutoTQA."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=20_000)
    sop: str = Field(
        "", max_length=50_000, description="Added to the dataset's standard procedure (SOP)."
    )
    dataset: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="The TQA dataset (profile): its SOP, few-shot example namespaces and "
        "hints. A name without a profile has only its hints.",
    )
    sources: list[str] | None = Field(
        None,
        max_length=MAX_SCOPE_ENTRIES,
        description="The data sources the question may use: 'source', or 'source.schema' for "
        "one schema of it. The SQL engine refuses any other table. None or empty: the "
        "dataset's sources (no dataset, or one without sources: every source).",
    )
    scheduler: SchedulerName = "fsm"
    max_rounds: int = Field(
        50, ge=1, le=100, description="Agent turns before giving up (the paper's 50)."
    )
    answer_format: str | None = Field(
        None,
        max_length=20_000,
        description="A predefined format to fill, a Jinja2 template over the Critic's "
        "`fields` (and `answer`), e.g. 'Bonus of {{ name }}: {{ bonus }}'.",
    )
    tool_timeout_s: float = Field(60, gt=0, le=3600, description="Per tool call.")
    agent_timeout_s: float = Field(120, gt=0, le=3600, description="Per agent turn.")

    @field_validator("sources")
    @classmethod
    def _scope_entries(cls, value: list[str] | None) -> list[str] | None:
        try:
            scope = SourceScope.parse(value)
        except ScopeError as exc:
            raise ValueError(exc.message) from exc
        return None if scope is None else scope.entries


@dataclass(slots=True)
class SchedulerChoice:
    agent: str
    reason: str
    by: str  # fsm | llm | rolling | start
    fallback: bool = False
    answer: str | None = None  # the LLM scheduler's raw answer
    usage: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "reason": self.reason,
            "by": self.by,
            "fallback": self.fallback,
            "answer": self.answer,
            "usage": self.usage,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SchedulerChoice:
        return cls(
            data["agent"],
            data["reason"],
            data["by"],
            bool(data.get("fallback")),
            data.get("answer"),
            data.get("usage"),
        )


@dataclass(slots=True)
class ToolCall:
    tool: str
    app: str | None
    input: dict[str, Any]
    sql: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    error: Failure | None = None
    hints: list[str] = field(default_factory=list)
    run_id: str | None = None
    outputs: dict[str, Any] | None = None  # a tool's outputs other than rows and SQL

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def empty(self) -> bool:
        return self.error is None and self.sql is not None and self.row_count == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "app": self.app,
            "input": self.input,
            "sql": self.sql,
            "columns": self.columns,
            "rows": self.rows,
            "row_count": self.row_count,
            "truncated": self.truncated,
            "error": self.error,
            "hints": self.hints,
            "run_id": self.run_id,
            "outputs": self.outputs,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        names = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in names})


@dataclass(slots=True)
class Turn:
    seq: int
    agent: str
    text: str
    content: Any = None
    scheduler: SchedulerChoice | None = None
    tool_call: ToolCall | None = None
    usage: dict[str, Any] | None = None
    run_id: str | None = None
    error: Failure | None = None  # the agent failed, or its output cannot be used
    started: float = 0.0  # seconds since the conversation started
    duration: float = 0.0
    agent_time: float = 0.0  # of which in the agent (model and tool), not the orchestrator

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "agent": self.agent,
            "text": self.text,
            "content": self.content,
            "scheduler": self.scheduler.to_dict() if self.scheduler else None,
            "tool_call": self.tool_call.to_dict() if self.tool_call else None,
            "usage": self.usage,
            "run_id": self.run_id,
            "error": self.error,
            "started": self.started,
            "duration": self.duration,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        """A recorded turn (its `to_dict` form), as a resumed conversation reads it."""
        scheduler, call = data.get("scheduler"), data.get("tool_call")
        return cls(
            data["seq"],
            data["agent"],
            data.get("text") or "",
            data.get("content"),
            SchedulerChoice.from_dict(scheduler) if scheduler else None,
            ToolCall.from_dict(call) if call else None,
            data.get("usage"),
            data.get("run_id"),
            data.get("error"),
            data.get("started") or 0.0,
            data.get("duration") or 0.0,
        )


@dataclass(slots=True)
class Conversation:
    id: str
    request: AskRequest
    created_at: datetime
    status: Status = "running"
    turns: list[Turn] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    error: Failure | None = None
    rounds: int = 0
    finished_at: datetime | None = None
    # seconds: total, in agents and tools (model and query time), and the rest (orchestrator)
    timing: dict[str, float] = field(default_factory=dict)
    # What the agents knew (the dataset's SOP, hints, example namespaces), set by `begin`.
    knowledge: Knowledge = field(default_factory=Knowledge)
    # This process's token as its runner (tqa/recording.py): the latest to take it up.
    runner: str | None = None
    # The replica lease of the server process running it in-process (embedded mode): when
    # that process dies, another server resumes it, or ends it if `foreground`
    # (tqa/recovery.py). None: a queue worker's, or a foreground one outside a server.
    replica: str | None = None
    # Its caller waits for the answer (sync, streamed, the `autotqa_ask` block).
    foreground: bool = False
    # Run by a queue worker, which hands it over when it stops (another resumes it): a
    # cancellation then ends it only when a cancel was requested (tqa/durable.py).
    handed_over_on_stop: bool = False
    cancel_requested: bool = False

    @property
    def sop(self) -> str:
        return self.knowledge.sop

    @property
    def profile(self) -> dict[str, Any] | None:
        return self.knowledge.profile

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens and cost of every agent turn and of the LLM scheduler's choices."""
        total: dict[str, Any] = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "cost": 0.0,
            "calls": 0,
        }
        scripted = False
        for turn in self.turns:
            for usage in (turn.usage, turn.scheduler.usage if turn.scheduler else None):
                if usage:
                    for key in total:
                        total[key] += usage.get(key) or 0
                    scripted = scripted or bool(usage.get("scripted"))
        total["scripted"] = scripted  # the scripted model answered: not a model's answers
        return total

    def last(self, agent: str | None = None) -> Turn | None:
        for turn in reversed(self.turns):
            if agent is None or turn.agent == agent:
                return turn
        return None

    def to_dict(self, turns: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "question": self.request.question,
            "dataset": self.request.dataset,
            "sop": self.sop,
            "profile": self.profile,
            "scheduler": self.request.scheduler,
            "max_rounds": self.request.max_rounds,
            "answer_format": self.request.answer_format,
            # The scope its tools and SQL ran under (the question's, else its dataset's).
            "sources": list(self.knowledge.sources),
            "status": self.status,
            "rounds": self.rounds,
            "answer": self.answer,
            "error": self.error,
            "usage": self.usage,
            "timing": self.timing,
            "created_at": self.created_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
        }
        if turns:
            data["turns"] = [turn.to_dict() for turn in self.turns]
        return data

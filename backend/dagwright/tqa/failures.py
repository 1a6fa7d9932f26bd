"""How AutoTQA fails, typed. Inside the orchestrator a failure is an exception with a code
(a `DagwrightError`); what a conversation records of it — a turn's, a tool call's or the
conversation's `error` — is a `Failure`, the same `{code, message}` wherever it appears (the
API, the stream, the stored turns).

Failures are turns, not crashes: the orchestrator catches these and records them, and the
scheduler goes on (docs/autotqa.md, "The orchestrator")."""

from __future__ import annotations

from typing_extensions import TypedDict

from dagwright.errors import DagwrightError


class Failure(TypedDict):
    """A recorded failure: its stable code and what happened."""

    code: str
    message: str


def failure(exc: DagwrightError) -> Failure:
    return {"code": exc.code, "message": exc.message}


class TqaError(DagwrightError):
    """Base of AutoTQA's own failures."""

    def failure(self) -> Failure:
        return failure(self)


class AgentOutputError(TqaError):
    """An agent answered something the orchestrator cannot use: an Engineer action that is
    neither `tool` nor `report` or names an unknown tool, a Critic verdict without
    `complete`."""

    code = "agent_output"


class ToolChoiceError(TqaError):
    """The Executor cannot call what the Engineer asked for: no such tool, or an input that
    is not a JSON object."""

    code = "tool_choice"


class ConversationEnded(TqaError):
    """Why a conversation ended without an answer."""


class RoundLimitReached(ConversationEnded):
    code = "round_limit"


class AgentsFailing(ConversationEnded):
    code = "agents_failing"


class ConversationCancelled(ConversationEnded):
    code = "cancelled"


class ApprovalPending(TqaError):
    """Not a failure: the tool the Engineer asked for needs a person's approval, requested;
    the conversation waits (status `waiting`) until it is answered (tqa/approvals.py)."""

    code = "approval_pending"


class ConversationSuperseded(TqaError):
    """Another process took the conversation up (this one was taken for dead): this one
    stops without writing anything more."""

    code = "superseded"

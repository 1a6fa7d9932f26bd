"""Approval of tool calls: a tool registered with `requires_approval` (tqa/tools.py) runs only
once a person approves the call. The Engineer's request becomes a human request
(services/human.py's table, listed with the flows' pauses in GET /api/v1/human/requests,
answered through the API, the CLI, a signed link or the editor) showing the tool, its app
and role and the input it will run with (its SQL or code when the input carries them); the
conversation waits (`waiting`, nothing held in a process). A tool whose role writes a plan
(tqa/roles.py `plans`: the Python tool) is first called to write it alone, and the request
shows that plan, the SQL and the program; approved, the tool runs that plan as it is, read
back from the request, so what runs is what the person read. Answering the request lets the
conversation go on (services/human.py -> TqaService.go_on) on whichever process takes it;
the Executor's turn then finds the answer here: `approve` runs the tool, `reject` gives the
Engineer a turn saying so, with the person's comment."""

from __future__ import annotations

import asyncio
import json
import secrets as token_source
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from sqlalchemy import Engine

from dagwright.store.db import session
from dagwright.store.human import HumanRequestRepository
from dagwright.store.human_models import HumanRequest
from dagwright.tqa.conversation import Conversation
from dagwright.tqa.failures import ApprovalPending
from dagwright.tqa.tools import Tool

APPROVE: Final = "approve"
REJECT: Final = "reject"
# What a tool's input may carry that a person should read before it runs.
_SHOWN: Final = ("sql", "code", "query", "program")


@dataclass(frozen=True, slots=True)
class Verdict:
    request_id: str
    approved: bool
    comment: str
    plan: dict[str, Any] | None = None  # the plan the person read, for a tool that plans

    def to_dict(self) -> dict[str, Any]:
        done = {"request_id": self.request_id, "approved": self.approved, "comment": self.comment}
        return done if self.plan is None else {**done, "plan": self.plan}

    @property
    def message(self) -> str:
        said = f": {self.comment}" if self.comment else " (no comment)"
        return f"a person rejected this tool call{said}"


def node_of(seq: int, tool: str) -> str:
    """The request's node: the Engineer's turn that asked for the tool."""
    return f"turn {seq}: {tool}"


def approval_form(
    conversation: Conversation,
    seq: int,
    tool: Tool,
    given: Any,
    plan: Mapping[str, Any] | None = None,
    written_by: str | None = None,
) -> dict[str, Any]:
    """The form a person answers: approve or reject, an optional comment; and (`approval`)
    what the call is, for the editor and the signed link's page to show: with a written
    `plan`, its SQL and program (what will run) rather than what the input carries, and
    the run that wrote it (`written_by`, the Executor's)."""
    shown = {k: given[k] for k in _SHOWN if isinstance(given, dict) and given.get(k)}
    if plan is not None:
        shown = {"plan": dict(plan), **{k: plan[k] for k in _SHOWN if plan.get(k)}}
        shown["plan_run_id"] = written_by
    return {
        "fields": [
            {
                "name": "comment",
                "type": "text",
                "label": "Comment (the Engineer reads it when you reject)",
                "required": False,
                "default": "",
            }
        ],
        "choices": [APPROVE, REJECT],
        "approval": {
            "conversation_id": conversation.id,
            "question": conversation.request.question,
            "turn": seq,
            "tool": tool.name,
            "app": tool.app,
            "role": tool.role,
            "input": given,
            **shown,
        },
    }


def _message(tool: Tool, given: Any, plan: Mapping[str, Any] | None) -> str:
    text = given if isinstance(given, str) else json.dumps(given, default=str)
    wrote = ""
    if plan is not None:
        wrote = f" It wrote the SQL {plan.get('sql')!r} and the program {plan.get('code')!r}."
    return (
        f"AutoTQA's Engineer asks to run the tool {tool.name!r} (app {tool.app}) with {text}."
        f"{wrote} Approve to run it, or reject it: the Engineer reads your comment."
    )


def _plan_of(form: Mapping[str, Any] | None) -> dict[str, Any] | None:
    plan = ((form or {}).get("approval") or {}).get("plan")
    return dict(plan) if isinstance(plan, Mapping) else None


class ApprovalDesk:
    """Where the orchestrator asks for approvals and reads their answers (the database)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def verdict(self, conversation: Conversation, seq: int, tool: Tool) -> Verdict | None:
        """The answer to the approval of the call the Engineer asked for at turn `seq`
        (with the plan it approved); ApprovalPending while its request waits; None when
        none was asked for yet."""
        return await asyncio.to_thread(self._verdict, conversation, seq, tool)

    def _verdict(self, conversation: Conversation, seq: int, tool: Tool) -> Verdict | None:
        with session(self._engine) as db:
            found = HumanRequestRepository(db).of_conversation(
                conversation.id, node_of(seq, tool.name)
            )
        if found is None or found.status not in ("answered", "waiting"):
            return None
        if found.status == "waiting":
            raise _pending(tool)
        answer = found.answer or {}
        return Verdict(
            found.id,
            found.choice == APPROVE,
            str(answer.get("comment") or ""),
            _plan_of(found.form),
        )

    async def ask(
        self,
        conversation: Conversation,
        seq: int,
        tool: Tool,
        given: Any,
        plan: Mapping[str, Any] | None = None,
        written_by: str | None = None,
    ) -> NoReturn:
        """Writes the approval request (once) of the call the Engineer asked for at turn
        `seq`, showing `plan` when the tool wrote one (in run `written_by`); raises
        ApprovalPending."""
        await asyncio.to_thread(self._ask, conversation, seq, tool, given, plan, written_by)
        raise _pending(tool)

    def _ask(
        self,
        conversation: Conversation,
        seq: int,
        tool: Tool,
        given: Any,
        plan: Mapping[str, Any] | None,
        written_by: str | None,
    ) -> None:
        node = node_of(seq, tool.name)
        with session(self._engine) as db:
            requests = HumanRequestRepository(db)
            found = requests.of_conversation(conversation.id, node)
            if found is not None and found.status in ("answered", "waiting"):
                return  # another process asked meanwhile
            requests.add(
                HumanRequest(
                    conversation_id=conversation.id,
                    node=node,
                    message=_message(tool, given, plan),
                    form=approval_form(conversation, seq, tool, given, plan, written_by),
                    link_token=token_source.token_urlsafe(32),
                )
            )
            db.commit()

    def close(self, conversation_id: str) -> None:
        """Closes (`cancelled`) the conversation's waiting requests: it was cancelled."""
        with session(self._engine) as db:
            HumanRequestRepository(db).close_conversation(conversation_id)
            db.commit()


def _pending(tool: Tool) -> ApprovalPending:
    return ApprovalPending(f"the call of tool {tool.name!r} waits for a person's approval")

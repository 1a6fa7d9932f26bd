"""Approval of tool calls: a tool registered with `requires_approval` (tqa/tools.py) runs only
once a person approves the call. The Engineer's request becomes a human request
(services/human.py's table, listed with the flows' pauses in GET /api/v1/human/requests,
answered through the API, the CLI, a signed link or the editor) showing the tool, its app
and role and the input it will run with (its SQL or code when the input carries them); the
conversation waits (`waiting`, nothing held in a process). Answering it lets the
conversation go on (services/human.py -> TqaService.go_on) on whichever process takes it;
the Executor's turn then finds the answer here: `approve` runs the tool, `reject` gives the
Engineer a turn saying so, with the person's comment."""

from __future__ import annotations

import asyncio
import json
import secrets as token_source
from dataclasses import dataclass
from typing import Any, Final

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

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "approved": self.approved, "comment": self.comment}

    @property
    def message(self) -> str:
        said = f": {self.comment}" if self.comment else " (no comment)"
        return f"a person rejected this tool call{said}"


def node_of(seq: int, tool: str) -> str:
    """The request's node: the Engineer's turn that asked for the tool."""
    return f"turn {seq}: {tool}"


def approval_form(conversation: Conversation, seq: int, tool: Tool, given: Any) -> dict[str, Any]:
    """The form a person answers: approve or reject, an optional comment; and (`approval`)
    what the call is, for the editor and the signed link's page to show."""
    shown = {k: given[k] for k in _SHOWN if isinstance(given, dict) and given.get(k)}
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


def _message(tool: Tool, given: Any) -> str:
    text = given if isinstance(given, str) else json.dumps(given, default=str)
    return (
        f"AutoTQA's Engineer asks to run the tool {tool.name!r} (app {tool.app}) with {text}. "
        "Approve to run it, or reject it: the Engineer reads your comment."
    )


class ApprovalDesk:
    """Where the orchestrator asks for approvals and reads their answers (the database)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def check(self, conversation: Conversation, seq: int, tool: Tool, given: Any) -> Verdict:
        """The answer to the approval of the call the Engineer asked for at turn `seq`;
        ApprovalPending (after writing the request, once) while there is none."""
        return await asyncio.to_thread(self._check, conversation, seq, tool, given)

    def _check(self, conversation: Conversation, seq: int, tool: Tool, given: Any) -> Verdict:
        node = node_of(seq, tool.name)
        with session(self._engine) as db:
            requests = HumanRequestRepository(db)
            found = requests.of_conversation(conversation.id, node)
            if found is not None and found.status == "answered":
                answer = found.answer or {}
                approved = found.choice == APPROVE
                return Verdict(found.id, approved, str(answer.get("comment") or ""))
            if found is None or found.status != "waiting":
                requests.add(
                    HumanRequest(
                        conversation_id=conversation.id,
                        node=node,
                        message=_message(tool, given),
                        form=approval_form(conversation, seq, tool, given),
                        link_token=token_source.token_urlsafe(32),
                    )
                )
                db.commit()
        raise ApprovalPending(f"the call of tool {tool.name!r} waits for a person's approval")

    def close(self, conversation_id: str) -> None:
        """Closes (`cancelled`) the conversation's waiting requests: it was cancelled."""
        with session(self._engine) as db:
            HumanRequestRepository(db).close_conversation(conversation_id)
            db.commit()

"""Tool roles: what the Executor gives a tool from the conversation when the Engineer leaves
it out, and whose few-shot examples the tool reads. A role is declared with the tool when it
is registered (tqa/tools.py), never inferred from the app it runs: any app can play the
text-to-SQL tool. Light on purpose: the Executor's block imports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_CONTEXT = {"hints": "hints", "feedback": "feedback", "examples": "examples", "sources": "sources"}


@dataclass(frozen=True, slots=True)
class ToolRole:
    """What a tool of this role is given from the conversation when the Engineer leaves it
    out (tool input -> context field; the first is what a text input stands for), and whose
    few-shot examples it reads (a TQA dataset's namespace role; None: none). `plans`: the
    tool writes a plan (its SQL and program) before running it and takes the inputs `mode`
    ('run', 'write': return the plan without running it, 'plan': run the given `plan` as it
    is), so a person approves the very program that runs (tqa/approvals.py)."""

    fills: Mapping[str, str]
    examples: str | None = None
    plans: bool = False

    @property
    def text_input(self) -> str:
        """The input an Engineer's text input stands for."""
        return next(iter(self.fills), "question")


TOOL_ROLES: dict[str, ToolRole] = {
    # Writes SQL for a question: AutoTQA's own tool, or any text-to-SQL app in its place.
    "text_to_sql": ToolRole({"question": "question", **_CONTEXT}, "text_to_sql"),
    # Writes and runs a pandas program for a task in words; writes it alone, or runs a given
    # one, on request (`plans`).
    "python": ToolRole({"task": "question", **_CONTEXT}, "python", plans=True),
    # Answers the question itself (the methods' apps: MAC-SQL, Chain-of-Table): the Engineer
    # names the database or table, the question comes along.
    "question": ToolRole({"question": "question"}),
}
# A tool without a role gets the Engineer's input only.
NO_ROLE = ToolRole({})


def tool_role(name: str | None) -> ToolRole:
    return TOOL_ROLES.get(name or "", NO_ROLE)

"""Tools: the roles a tool may play (what the Executor gives it from the conversation, and
whose examples it reads) and the built-in tools, registered when the AutoTQA apps are
published. Any published app becomes a tool the same way, with a role or none
(`PUT /api/v1/tqa/tools/{name}`, `dagwright tqa tools add --role`); the records are kept by
store/tqa/tools.py. Light on purpose: the Executor's block imports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_CONTEXT = {"hints": "hints", "feedback": "feedback", "examples": "examples", "sources": "sources"}


@dataclass(frozen=True, slots=True)
class ToolRole:
    """What a tool of this role is given from the conversation when the Engineer leaves it
    out (tool input -> context field; the first is what a text input stands for), and whose
    few-shot examples it reads (a TQA dataset's namespace role; None: none)."""

    fills: Mapping[str, str]
    examples: str | None = None

    @property
    def text_input(self) -> str:
        """The input an Engineer's text input stands for."""
        return next(iter(self.fills), "question")


TOOL_ROLES: dict[str, ToolRole] = {
    # Writes SQL for a question: AutoTQA's own tool, or any text-to-SQL app in its place.
    "text_to_sql": ToolRole({"question": "question", **_CONTEXT}, "text_to_sql"),
    # Writes and runs a pandas program for a task in words.
    "python": ToolRole({"task": "question", **_CONTEXT}, "python"),
    # Answers the question itself (the methods' apps: MAC-SQL, Chain-of-Table): the Engineer
    # names the database or table, the question comes along.
    "question": ToolRole({"question": "question"}),
}
# A tool without a role gets the Engineer's input only.
NO_ROLE = ToolRole({})


def tool_role(name: str | None) -> ToolRole:
    return TOOL_ROLES.get(name or "", NO_ROLE)


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A built-in tool: the app it runs, what the Engineer reads, its role."""

    app: str
    description: str
    role: str | None = None


BUILTIN_TOOLS = {
    "text_to_sql": ToolDeclaration(
        "autotqa-text-to-sql",
        "Answers one precise data question with SQL across every registered source (joins "
        "across systems included): finds the tables, writes read-only SQL, runs it and "
        "returns the rows, or the error. Describe the data wanted in words. "
        'Input: {"question": "..."}.',
        "text_to_sql",
    ),
    "python_on_tables": ToolDeclaration(
        "autotqa-python",
        "Computes with Python (pandas) over the tables, in a sandbox, for calculations SQL "
        "makes awkward: describe the task in words; the tool finds the tables, writes the "
        'query and the program, and runs them. Input: {"task": "..."}.',
        "python",
    ),
}

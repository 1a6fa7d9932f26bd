"""What the offline demo's scripted model can answer in AutoTQA, so that a question it has no
script for is refused at once with that explanation, instead of twelve (now fifty) rounds of
scripted replies that make no sense for it.

Only the offline demo (no provider configured: the default script) is known here; a server
pointed at another scripted server or a replay cannot say which questions that one knows, so
nothing is refused there."""

from __future__ import annotations

import re
from functools import cache

from dagwright.errors import InputError
from dagwright.llm.gateway import LLMGateway
from dagwright.llm.scripted.script import default_script

# The text-to-SQL tool's rules name the exact question they answer: "...Question: <q>\?".
_SQL_RULE = re.compile(r"^\(\?s\)\^\\\[autotqa:text_to_sql\\\].*Question: (.+?)\\\?$")


class UnscriptedQuestionError(InputError):
    code = "scripted_question_unknown"

    def __init__(self, message: str, questions: list[str]) -> None:
        super().__init__(message)
        self.questions = questions

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "questions": self.questions}


def is_offline_demo(gateway: LLMGateway) -> bool:
    """No provider configured: the process answers with the default script (a dagwright.toml
    naming a scripted server, as the tests' does, plays another script: not this one)."""
    return gateway.plays_default_script


@cache
def demo_questions() -> list[str]:
    """The AutoTQA questions the default script plays, in its order, each once."""
    found: list[str] = []
    for rule in default_script().rules:
        hit = _SQL_RULE.match(rule.match or "")
        if hit:
            question = re.sub(r"\\(.)", r"\1", hit.group(1)) + "?"
            if question not in found:
                found.append(question)
    return found


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def refuse_unscripted(gateway: LLMGateway, question: str) -> None:
    """Raises UnscriptedQuestionError when the offline demo has no script for `question`."""
    if not is_offline_demo(gateway):
        return
    known = demo_questions()
    if any(_same(question, q) for q in known):
        return
    raise UnscriptedQuestionError(
        "no model provider is configured, and dagwright's scripted model only knows the demo "
        f"questions ({'; '.join(known)}) — its answers are scripted, not a model's. Ask one "
        "of those, or configure a provider in dagwright.toml (docs/llm.md) to ask your own.",
        known,
    )

"""Common knowledge collected from past errors (AutoTQA section 4.4: "we collect similar error
information and provide it to the Engineer as common knowledge"): when a tool call that failed
or found nothing is retried and the retry succeeds, what was learned — the error, the fix,
the tables involved — becomes a candidate hint of the conversation's dataset. Later questions
get the learned hints whose question is most similar to theirs (by embedding), candidates
included, until an operator drops them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagwright.tqa.hints import GENERAL_HINTS, _tables_and_filters

if TYPE_CHECKING:
    from dagwright.embedding.embedder import Embedder
    from dagwright.tqa.conversation import Conversation, ToolCall
    from dagwright.tqa.hints import Hint

# A learned hint is given when its question is at least this similar to the new one (cosine
# of the embeddings; with the default lexical embedder, sharing most words).
MIN_SIMILARITY = 0.5


@dataclass(slots=True, frozen=True)
class Lesson:
    text: str
    details: dict[str, Any]


def _code(call: ToolCall) -> str | None:
    code = (call.outputs or {}).get("code")
    return str(code) if code else None


def _what(call: ToolCall) -> str:
    parts = [f"`{call.sql}`" if call.sql else f"{call.tool} with {call.input}"]
    if _code(call):
        parts.append(f"with the program `{_code(call)}`")
    return " ".join(parts)


def _tables(sql: str | None) -> list[str]:
    if not sql:
        return []
    try:
        tables, _ = _tables_and_filters(sql)
    except Exception:  # sqlglot's errors: a lesson without its tables
        return []
    return sorted(set(tables.values()))


def lesson(failed: ToolCall, fixed: ToolCall) -> Lesson:
    """What a successful retry teaches: the failure, the checked hint that explained it (not
    the general reminders), and what worked."""
    if failed.error is not None:
        outcome = f"failed ({failed.error['code']}: {failed.error['message'][:300]})"
    else:
        outcome = "returned no rows"
    specific = [h for h in failed.hints if h not in GENERAL_HINTS and not h.startswith("Learned")]
    tables = _tables(fixed.sql) or _tables(failed.sql)
    text = f"{_what(failed)} {outcome}"
    if specific:
        text += f" ({specific[0]})"
    text += f"; this worked instead: {_what(fixed)}"
    if tables:
        text += f" (tables: {', '.join(tables)})"
    return Lesson(
        text + ".",
        {
            "tool": fixed.tool,
            "error": failed.error or {"code": "empty_result", "message": "no rows"},
            "failed_sql": failed.sql,
            "fixed_sql": fixed.sql,
            "failed_code": _code(failed),
            "fixed_code": _code(fixed),
            "checked_hints": specific,
            "tables": tables,
            "failed_run_id": failed.run_id,
            "fixed_run_id": fixed.run_id,
        },
    )


def lessons(conversation: Conversation) -> list[Lesson]:
    """One lesson per retry that succeeded after its tool failed or found nothing."""
    found: list[Lesson] = []
    last: dict[str, ToolCall] = {}
    for turn in conversation.turns:
        call = turn.tool_call
        if call is None:
            continue
        before = last.get(call.tool)
        if before is not None and (not before.ok or before.empty) and call.ok and not call.empty:
            found.append(lesson(before, call))
        last[call.tool] = call
    return found


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


async def similar(
    hints: Sequence[Hint],
    question: str,
    embedder: Embedder,
    k: int,
    min_similarity: float = MIN_SIMILARITY,
) -> list[tuple[Hint, float]]:
    """The k learned hints (not dropped) whose question is most similar to `question`, best
    first, with their similarity."""
    learned = [h for h in hints if h.source == "learned" and h.status != "dropped" and h.question]
    if not learned or k <= 0:
        return []
    vectors = await embedder.embed([question, *(str(h.question) for h in learned)])
    scored = [(h, _cosine(vectors[0], v)) for h, v in zip(learned, vectors[1:], strict=True)]
    scored = [(h, s) for h, s in scored if s >= min_similarity]
    scored.sort(key=lambda pair: pair[1], reverse=True)
    return scored[:k]

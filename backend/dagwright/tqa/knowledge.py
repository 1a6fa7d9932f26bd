"""What the agents of one conversation know besides the conversation: the dataset's SOP,
its common knowledge (hints written by hand, and learned hints whose question is like this
one) and few-shot examples picked per question from each agent's namespace in the
embedding service. Gathered when a conversation begins, from the TQA profile the request
names; the lessons of its successful retries are recorded when it ends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dagwright.tqa.learning import lessons, similar
from dagwright.tqa.profiles import EXAMPLE_ROLES

if TYPE_CHECKING:
    from dagwright.embedding.embedder import Embedder
    from dagwright.embedding.service import ExampleStore
    from dagwright.tqa.conversation import AskRequest, Conversation
    from dagwright.tqa.hints import HintStore
    from dagwright.tqa.profiles import ProfileStore

# The embedder that compares a question with the questions learned hints came from.
HINT_EMBEDDER = "hashing"


@dataclass(slots=True)
class Knowledge:
    """One conversation's knowledge. `profile` is the record of what was used (None: the
    request named no TQA profile)."""

    sop: str = ""
    hints: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None
    namespaces: dict[str, str] = field(default_factory=dict)
    examples_k: int = 0

    def namespace(self, role: str) -> str | None:
        return self.namespaces.get(role) if self.examples_k > 0 else None


class KnowledgeSource:
    """Where the orchestrator gets knowledge from; this base knows nothing (no profile, no
    examples) and learns nothing."""

    async def gather(self, request: AskRequest) -> Knowledge:
        return Knowledge(sop=request.sop, sources=list(request.sources or []))

    async def examples(self, knowledge: Knowledge, role: str, query: str) -> str:
        """The examples of `role` most like `query`, rendered for its prompt ("" if none)."""
        return ""

    async def learn(self, conversation: Conversation) -> list[dict[str, Any]]:
        """Records the conversation's lessons; returns the hints recorded."""
        return []


def _render(role: str, payload: dict[str, Any]) -> str:
    first, second = EXAMPLE_ROLES[role]
    return f"{first.capitalize()}: {payload.get(first, '')}\n{second.capitalize()}: " + str(
        payload.get(second, "")
    )


class StoredKnowledge(KnowledgeSource):
    """From the TQA profiles, the hint store and the example store of this process."""

    def __init__(
        self,
        profiles: ProfileStore,
        hints: HintStore,
        examples: ExampleStore | None,
        embedder: Embedder | None = None,
    ) -> None:
        self._profiles = profiles
        self._hints = hints
        self._examples = examples
        self._embedder = embedder

    def _hint_embedder(self) -> Embedder:
        if self._embedder is None:
            if self._examples is not None:
                self._embedder = self._examples.embedder(HINT_EMBEDDER)
            else:
                from dagwright.embedding.lexical import HashingEmbedder

                self._embedder = HashingEmbedder()
        return self._embedder

    async def gather(self, request: AskRequest) -> Knowledge:
        if not request.dataset:
            return Knowledge(sop=request.sop, sources=list(request.sources or []))
        profile = await asyncio.to_thread(self._profiles.find, request.dataset)
        stored = await asyncio.to_thread(self._hints.list, request.dataset)
        manual = [h.text for h in stored if h.source == "manual" and h.status == "confirmed"]
        k = profile.hints_k if profile is not None else 3
        learned = await similar(stored, request.question, self._hint_embedder(), k)
        hints = [*manual, *(f"Learned earlier: {h.text}" for h, _ in learned)]
        sop = "\n\n".join(part for part in (profile.sop if profile else "", request.sop) if part)
        record: dict[str, Any] = {
            "name": request.dataset,
            "found": profile is not None,
            "sop_version": profile.sop_version if profile else 0,
            "namespaces": dict(profile.namespaces) if profile else {},
            "examples_k": profile.examples_k if profile else 0,
            "sources": list(profile.sources) if profile else [],
            "hints": [h.id for h in stored if h.source == "manual" and h.status == "confirmed"],
            "learned_hints": [
                {"id": h.id, "status": h.status, "similarity": round(score, 3)}
                for h, score in learned
            ],
            "learned": [],
        }
        return Knowledge(
            sop=sop,
            hints=hints,
            # The question's own scope, else its dataset's (tools and engine: data/scope.py).
            sources=list(request.sources or (profile.sources if profile else [])),
            profile=record,
            namespaces=dict(profile.namespaces) if profile else {},
            examples_k=profile.examples_k if profile else 0,
        )

    async def examples(self, knowledge: Knowledge, role: str, query: str) -> str:
        namespace = knowledge.namespace(role)
        if namespace is None or self._examples is None or not query.strip():
            return ""
        hits = await self._examples.query(namespace, query, k=knowledge.examples_k)
        # Most similar last, next to the question (as the few_shot block does).
        return "\n\n".join(_render(role, hit.payload) for hit in reversed(hits))

    async def learn(self, conversation: Conversation) -> list[dict[str, Any]]:
        dataset = conversation.request.dataset
        if not dataset:
            return []
        recorded: list[dict[str, Any]] = []
        for found in lessons(conversation):
            hint = await asyncio.to_thread(
                self._hints.learn,
                dataset,
                found.text,
                question=conversation.request.question,
                conversation_id=conversation.id,
                details=found.details,
            )
            if hint is not None:
                recorded.append(hint.to_dict())
        return recorded

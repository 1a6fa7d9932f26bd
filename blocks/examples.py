"""Few-shot examples from the embedding service: pick the examples most like a question and
render them for a prompt; and store new examples from a flow (so a flow can learn from its
own runs)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.registry import EXAMPLES, NodeContext, block
from dagwright.templating import check_template, render

# The example store (dagwright.embedding.service) is imported when a block runs, not when the
# registry loads.

_NAMESPACE = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class FewShotConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(pattern=_NAMESPACE, description="The example namespace to search.")
    k: int = Field(5, ge=1, le=50, description="How many examples to pick.")
    template: str = Field(
        "Q: {{ example.question }}\nA: {{ example.answer }}",
        description="A Jinja2 template for one example; `example` is its payload, `score` "
        "its similarity, `rank` its place (1 = most similar).",
    )
    separator: str = Field("\n\n", description="Put between two rendered examples.")
    order: Literal["most_similar_last", "most_similar_first"] = Field(
        "most_similar_last",
        description="Most similar last puts the best example next to the question, as the "
        "AutoTQA paper does.",
    )
    min_score: float | None = Field(None, description="Leave out examples scoring below this.")
    filter: dict[str, Any] = Field(
        default_factory=dict, description="Only examples whose payload has these values."
    )

    @field_validator("template")
    @classmethod
    def _parses(cls, text: str) -> str:
        return check_template(text)


class UpsertConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str = Field(pattern=_NAMESPACE, description="The namespace to store into.")


@block(
    "few_shot",
    category="tool",
    description="Pick the stored examples most like the query and render them for a prompt.",
    example="query 'bonus for Tom?' -> 'Q: salary of Ann?\\nA: SELECT ...' (5 examples)",
    needs=(EXAMPLES,),
)
async def few_shot(config: FewShotConfig, ctx: NodeContext, query: str) -> str:
    """Searches the namespace for the `k` examples closest to the query (by embedding) and
    renders each with the template, joined by the separator — ready to drop into an LLM
    prompt. By default the most similar example comes last, nearest the question. An empty
    namespace gives an empty text."""

    store = ctx.service(EXAMPLES)
    hits = await store.query(
        config.namespace,
        query,
        k=config.k,
        filter=config.filter or None,
        min_score=config.min_score,
    )
    ranked = list(enumerate(hits, start=1))
    if config.order == "most_similar_last":
        ranked.reverse()
    ctx.emit("examples", ids=[hit.id for _, hit in ranked], scores=[hit.score for _, hit in ranked])
    parts = [
        render(config.template, {"example": hit.payload, "score": hit.score, "rank": rank})
        for rank, hit in ranked
    ]
    return config.separator.join(parts)


@block(
    "example_upsert",
    category="tool",
    description="Store an example (a dict) in a namespace; the same key replaces it.",
    example="{'question': ..., 'sql': ...} -> its id",
    needs=(EXAMPLES,),
)
async def example_upsert(config: UpsertConfig, ctx: NodeContext, example: dict[str, Any]) -> str:
    """Stores the example in the namespace (its key fields make it idempotent: storing it
    again replaces it) and returns its id. Use it after a step that produced a verified
    answer, so the flow's next runs can pick it as a few-shot example."""

    store = ctx.service(EXAMPLES)
    ids = await store.upsert(config.namespace, [example])
    return ids[0]

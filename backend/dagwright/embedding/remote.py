"""Embeddings from any OpenAI-compatible embeddings API, through the LLM gateway (so calls get
its retries, concurrency limits, accounting and recording)."""

from __future__ import annotations

from dagwright.embedding.embedder import Embedder
from dagwright.errors import DagwrightError
from dagwright.llm.gateway import LLMGateway


class EmbeddingDimensionError(DagwrightError):
    """The provider returned vectors of another size than the embedder (its namespace) has."""

    code = "embedding_dimension"


class GatewayEmbedder(Embedder):
    """`provider` None is the gateway's default provider; `model` None is that provider's
    default model. With `send_dimensions`, `dimension` is also asked of the API (OpenAI's
    text-embedding-3 models can shorten vectors; other models reject the parameter)."""

    def __init__(
        self,
        gateway: LLMGateway,
        provider: str | None,
        model: str | None,
        dimension: int,
        *,
        send_dimensions: bool = False,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"the embedding dimension must be at least 1, not {dimension}")
        self.gateway = gateway
        self.provider = provider
        self.model = model
        self.dimension = dimension
        self.send_dimensions = send_dimensions
        self.spec = f"openai:{provider or 'default'}:{model or 'default'}"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        result = await self.gateway.embed(
            self.provider,
            texts,
            model=self.model,
            dimensions=self.dimension if self.send_dimensions else None,
        )
        vectors = result.vectors
        if len(vectors) != len(texts):
            raise EmbeddingDimensionError(
                f"embedder {self.spec} got {len(vectors)} vector(s) for {len(texts)} text(s)"
            )
        for vector in vectors:
            if len(vector) != self.dimension:
                # Storing such a vector would corrupt the namespace (Qdrant fixes the size),
                # so it is refused here with both sizes, the usual cause being a model change.
                raise EmbeddingDimensionError(
                    f"embedder {self.spec} (model {result.model!r}) returned vectors of "
                    f"{len(vector)} dimensions, expected {self.dimension}"
                )
        return vectors

"""What turns texts into vectors. Implementations: the OpenAI-compatible embeddings API (any
provider), a local sentence model (all-MiniLM-L6-v2, offline), and a deterministic lexical one
(feature hashing) for tests. A namespace fixes its embedder and dimension when it is made."""

from __future__ import annotations

from dagwright.errors import DagwrightError


class EmbedderUnavailableError(DagwrightError):
    """The embedder cannot run here: the message says what to install or configure."""

    code = "embedder_unavailable"


class Embedder:
    """A plain base class (looked up and typed by it). `spec` names it reproducibly, e.g.
    "hashing:256", "minilm", "openai:my-provider:text-embedding-3-small"."""

    spec: str
    dimension: int

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order. Texts are not empty (callers check)."""
        raise NotImplementedError

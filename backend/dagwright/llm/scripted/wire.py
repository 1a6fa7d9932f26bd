"""OpenAI's wire format as the scripted server speaks it: request bodies, responses, chunks."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from dagwright.llm.scripted.tokens import stream_pieces

FINGERPRINT = "dagwright-scripted"
SCRIPTED_HEADER = "x-dagwright-scripted"
ID_PREFIX = "scripted-"


def new_id() -> str:
    """A fresh response id; the prefix tells it came from the scripted server."""
    return f"{ID_PREFIX}{uuid.uuid4().hex[:24]}"


def _content_parts(value: Any) -> Any:
    # OpenAI accepts a string, a list of parts or null; normalising to parts keeps one type.
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, list):
        return value
    raise ValueError("should be a string, a list of content parts or null")


def _strings(value: Any) -> Any:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return value
    raise ValueError("should be a string or a non-empty list of strings")


class _Body(BaseModel):
    # Requests may carry any of OpenAI's parameters; those not modelled are accepted and unused.
    model_config = ConfigDict(extra="allow")


class ContentPart(_Body):
    type: str
    text: str | None = None


class ChatMessage(_Body):
    role: str
    content: Annotated[list[ContentPart], BeforeValidator(_content_parts)] = Field(
        default_factory=list
    )

    def text(self) -> str:
        """The message's text: its text parts joined."""
        return "".join(part.text or "" for part in self.content if part.type == "text")


class StreamOptions(_Body):
    include_usage: bool | None = None


class _Generation(_Body):
    model: str
    n: int | None = Field(default=None, ge=1, le=128)
    stream: bool | None = None
    stream_options: StreamOptions | None = None

    @property
    def samples(self) -> int:
        return self.n or 1

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(_Generation):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)


class CompletionRequest(_Generation):
    prompt: Annotated[list[str], BeforeValidator(_strings)]


class EmbeddingRequest(_Body):
    model: str
    input: Annotated[list[str], BeforeValidator(_strings)]
    dimensions: int | None = Field(default=None, ge=1, le=65536)
    encoding_format: Literal["float", "base64"] | None = None


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def error_body(message: str, type_: str, code: str | None) -> dict[str, Any]:
    """An error in OpenAI's shape."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event carrying ``data`` (JSON-encoded unless it is a string)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode()


class Completion:
    """The parts every response and chunk of one answer share."""

    def __init__(
        self,
        model: str,
        texts: list[str],
        finish_reason: str,
        logprobs: list[float] | None = None,
    ) -> None:
        self.id = new_id()
        self.created = int(time.time())
        self.model = model
        self.texts = texts
        self.finish_reason = finish_reason
        # Per choice, the answer's scripted log-probability (None: the request asked for none).
        self.logprobs = logprobs

    def _token_logprobs(self, index: int, pieces: list[str]) -> dict[str, Any] | None:
        """Choice ``index``'s pieces as tokens whose log-probabilities sum to its scripted
        one (spread evenly), in OpenAI's ``logprobs`` shape."""
        if self.logprobs is None:
            return None
        total = self.logprobs[index]
        share = total / len(pieces) if pieces else 0.0
        return {
            "content": [
                {
                    "token": piece,
                    "logprob": share,
                    "bytes": list(piece.encode()),
                    "top_logprobs": [],
                }
                for piece in pieces
            ],
            "refusal": None,
        }

    def _head(self, object_: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": object_,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": FINGERPRINT,
        }

    def chat(self, token_usage: dict[str, int]) -> dict[str, Any]:
        """A ``chat.completion`` response."""
        choices = [
            {
                "index": index,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": self._token_logprobs(index, stream_pieces(text)),
                "finish_reason": self.finish_reason,
            }
            for index, text in enumerate(self.texts)
        ]
        return {**self._head("chat.completion"), "choices": choices, "usage": token_usage}

    def text(self, token_usage: dict[str, int]) -> dict[str, Any]:
        """A ``text_completion`` response."""
        choices = [
            {"index": index, "text": text, "logprobs": None, "finish_reason": self.finish_reason}
            for index, text in enumerate(self.texts)
        ]
        return {**self._head("text_completion"), "choices": choices, "usage": token_usage}

    def _pieces(self) -> Iterator[tuple[int, str]]:
        # Choices take turns, one piece each, as a model sampling them in parallel would.
        pieces = [stream_pieces(text) for text in self.texts]
        for step in range(max((len(p) for p in pieces), default=0)):
            for index, own in enumerate(pieces):
                if step < len(own):
                    yield index, own[step]

    def chat_chunks(self, token_usage: dict[str, int] | None) -> Iterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed answer, in order.

        ``token_usage`` is given when the request asked for it (``include_usage``): every
        chunk then carries ``usage: null`` and a last chunk without choices carries it.
        """
        head = self._head("chat.completion.chunk")
        if token_usage is not None:
            head["usage"] = None

        def chunk(
            index: int, delta: dict[str, Any], finish: str | None, logprobs: Any = None
        ) -> dict[str, Any]:
            choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
            return {**head, "choices": [choice]}

        for index in range(len(self.texts)):
            yield chunk(index, {"role": "assistant", "content": ""}, None)
        counts = [len(stream_pieces(text)) for text in self.texts]
        for index, piece in self._pieces():
            share = None
            if self.logprobs is not None:
                share = self._token_logprobs(index, [piece])
                assert share is not None
                share["content"][0]["logprob"] = self.logprobs[index] / counts[index]
            yield chunk(index, {"content": piece}, None, share)
        for index in range(len(self.texts)):
            yield chunk(index, {}, self.finish_reason)
        if token_usage is not None:
            yield {**head, "choices": [], "usage": token_usage}

    def text_chunks(self, token_usage: dict[str, int] | None) -> Iterator[dict[str, Any]]:
        """The ``text_completion`` chunks of a streamed legacy completion, in order."""
        head = self._head("text_completion")
        if token_usage is not None:
            head["usage"] = None

        def chunk(index: int, text: str, finish: str | None) -> dict[str, Any]:
            choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        for index, piece in self._pieces():
            yield chunk(index, piece, None)
        for index in range(len(self.texts)):
            yield chunk(index, "", self.finish_reason)
        if token_usage is not None:
            yield {**head, "choices": [], "usage": token_usage}


def embeddings_response(
    model: str, vectors: list[list[float] | str], prompt_tokens: int
) -> dict[str, Any]:
    """An embeddings response; a vector given as a string is base64-encoded already."""
    data = [
        {"object": "embedding", "index": index, "embedding": vector}
        for index, vector in enumerate(vectors)
    ]
    return {
        "id": new_id(),
        "object": "list",
        "data": data,
        "model": model,
        "system_fingerprint": FINGERPRINT,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def model_list(names: list[str]) -> dict[str, Any]:
    """The ``GET /v1/models`` response."""
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": FINGERPRINT} for name in names
    ]
    return {"object": "list", "data": data, "system_fingerprint": FINGERPRINT}

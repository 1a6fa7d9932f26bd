"""Scripts from recordings: replay a run's model exchanges through the scripted server.

A recording is the JSONL file the LLM gateway writes, one exchange per line::

    {"endpoint": "chat" | "completions" | "embeddings", "model": "...",
     "request": {"messages" | "prompt" | "input": ..., other parameters},
     "response": {"choices": ["..."], "vectors": [[...]], "usage": {...}}}

Each distinct (endpoint, model, last message) becomes one rule matching exactly that model and
that text, whose replies are the recorded responses in recorded order: the same question asked
twice replays both answers, in order. The text is the last message of a chat, the (first)
prompt of a completion, the first input of an embedding request. A request the recording does
not hold gets an error saying no scripted reply matches.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dagwright.errors import describe_validation_error
from dagwright.llm.scripted.script import (
    Endpoint,
    Reply,
    ReplyUsage,
    Rule,
    Script,
    ScriptError,
)


class _Recorded(BaseModel):
    # The gateway may add fields over time; what replay needs is checked, the rest is ignored.
    model_config = ConfigDict(extra="ignore")


class _RecordedUsage(_Recorded):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)


class _RecordedResponse(_Recorded):
    choices: list[str] = Field(default_factory=list)
    vectors: list[list[float]] = Field(default_factory=list)
    usage: _RecordedUsage | None = None

    def reply_usage(self) -> ReplyUsage | None:
        if self.usage is None:
            return None
        return ReplyUsage(
            prompt_tokens=self.usage.prompt_tokens,
            completion_tokens=self.usage.completion_tokens,
        )


class _RecordedExchange(_Recorded):
    endpoint: Literal["chat", "completions", "embeddings"]
    model: str
    request: dict[str, Any]
    response: _RecordedResponse


def _text(value: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(part.get("text") or "")
            for part in value
            if isinstance(part, dict) and part.get("type") == "text"
        )
    raise ValueError("message content should be a string, a list of parts or null")


def _first(value: Any, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[0], str):
        return value[0]
    raise ValueError(f"request.{field} should be a string or a non-empty list of strings")


def _key_text(exchange: _RecordedExchange) -> str:
    """The text the server matches for this exchange's request."""
    request = exchange.request
    if exchange.endpoint == "chat":
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
            raise ValueError("request.messages should be a non-empty list of messages")
        return _text(messages[-1].get("content"))
    if exchange.endpoint == "completions":
        return _first(request.get("prompt"), "prompt")
    return _first(request.get("input"), "input")


def _reply(exchange: _RecordedExchange) -> Reply:
    response = exchange.response
    if exchange.endpoint == "embeddings":
        if not response.vectors:
            raise ValueError("response.vectors is empty for an embeddings exchange")
        return Reply(vectors=response.vectors, usage=response.reply_usage())
    choices = response.choices or [""]
    return Reply(content=choices[0], choices=choices, usage=response.reply_usage())


def _model_pattern(model: str) -> str:
    # Rules take globs; a model name with glob characters must still match only itself.
    return glob.escape(model)


def script_from_recording(path: Path | str) -> Script:
    """A script that answers the recorded requests with the recorded responses, in order."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the recording: {exc.strerror}") from None
    replies: dict[tuple[Endpoint, str, str], list[Reply]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            exchange = _RecordedExchange.model_validate(json.loads(line))
            key = (exchange.endpoint, exchange.model, _key_text(exchange))
            replies.setdefault(key, []).append(_reply(exchange))
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{where}: not valid JSON: {exc}") from None
        except ValidationError as exc:
            raise ScriptError(f"{where}: {describe_validation_error(exc)}") from None
        except ValueError as exc:
            raise ScriptError(f"{where}: {exc}") from None
    rules = [
        Rule(
            name=f"replay-{index}",
            endpoint=endpoint,
            model=_model_pattern(model),
            # Exactly the whole text: \Z, unlike $, does not also match before a final newline.
            match=r"(?s)\A" + re.escape(text) + r"\Z",
            replies=sequence,
        )
        for index, ((endpoint, model, text), sequence) in enumerate(replies.items())
    ]
    models = list(dict.fromkeys(model for _, model, _ in replies))
    return Script(models=models or ["scripted"], rules=rules)

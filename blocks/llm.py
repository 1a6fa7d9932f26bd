"""LLM blocks: chat, structured (JSON) chat, several samples, text completion, embeddings.

They call models through the run's LLMGateway (any OpenAI-compatible provider), stream token
deltas as `token` events, and account for every call (`usage` events, summed per run).
Prompts are Jinja2 templates rendered in a sandbox; their variables are the input ports.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.errors import DagwrightError
from dagwright.registry import MODELS, NodeContext, block
from dagwright.templating import check_template, render, variables_of

if TYPE_CHECKING:
    # Imported where used (~90 ms together): loading the registry must not cost a flow
    # without models the model gateway and JSON Schema.
    from dagwright.llm.gateway import CallResult, ChatRequest, DeltaFn


class ModelOutputError(DagwrightError):
    """The model answered, but not in the shape the block needs (e.g. not JSON)."""

    code = "model_output"


class ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="A configured provider; empty: the default.")
    model: str | None = Field(None, description="Empty: the provider's default model.")
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, description="At most this many tokens in reply.")
    stop: list[str] | None = Field(None, max_length=4, description="Stop at any of these texts.")
    seed: int | None = Field(None, description="For providers that sample reproducibly.")


class ChatConfig(ModelConfig):
    system: str = Field("", description="The system prompt, a Jinja2 template.")
    prompt: str = Field(description="The user prompt, a Jinja2 template; its variables are ports.")
    stream: bool = Field(True, description="Stream tokens to the debug panel as they arrive.")

    @field_validator("system", "prompt")
    @classmethod
    def _parses(cls, text: str, info: Any) -> str:
        return check_template(text, field=info.field_name)


class ChatJsonConfig(ChatConfig):
    json_schema: dict[str, Any] | None = Field(
        None,
        description="A JSON Schema the answer must match (sent as the response format); "
        "empty: any JSON object (JSON mode).",
    )

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is not None:
            import jsonschema

            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"json_schema is not a valid JSON Schema: {exc.message}") from None
        return schema


class ChatSamplesConfig(ChatConfig):
    n: int = Field(3, ge=2, le=16, description="How many answers to sample.")


class ChatScoredConfig(ChatConfig):
    n: int = Field(1, ge=1, le=16, description="How many answers to sample.")
    top_logprobs: int | None = Field(
        None, ge=0, le=20, description="Also this many alternatives per token (0-20)."
    )


class CompletionConfig(ModelConfig):
    prompt: str = Field(description="The prompt to continue, a Jinja2 template.")
    stream: bool = True

    @field_validator("prompt")
    @classmethod
    def _parses(cls, text: str) -> str:
        return check_template(text, field="prompt")


class EmbeddingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="A configured provider; empty: the default.")
    model: str | None = Field(None, description="Empty: the provider's default model.")
    dimensions: int | None = Field(None, ge=1, description="For models that can shorten vectors.")


History = Annotated[
    list[dict[str, Any]] | None,
    "Earlier messages ({role, content}) placed between the system prompt and the prompt.",
]


def _chat_ports(config: ChatConfig) -> list[str]:
    return variables_of([config.system, config.prompt])


def _completion_ports(config: CompletionConfig) -> list[str]:
    return variables_of([config.prompt])


def _messages(
    config: ChatConfig, history: list[dict[str, Any]] | None, variables: dict[str, Any]
) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if config.system:
        messages.append({"role": "system", "content": render(config.system, variables, "system")})
    for index, message in enumerate(history or []):
        if not isinstance(message.get("role"), str) or "content" not in message:
            raise ValueError(f"history[{index}] needs 'role' and 'content'")
        messages.append(message)
    messages.append({"role": "user", "content": render(config.prompt, variables, "prompt")})
    return messages


def _request(
    config: ChatConfig,
    history: list[dict[str, Any]] | None,
    variables: dict[str, Any],
    n: int = 1,
    response_format: dict[str, Any] | None = None,
    logprobs: bool = False,
    top_logprobs: int | None = None,
) -> ChatRequest:
    from dagwright.llm.gateway import ChatRequest

    return ChatRequest(
        messages=_messages(config, history, variables),
        model=config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        stop=config.stop,
        seed=config.seed,
        n=n,
        response_format=response_format,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )


def _token_events(ctx: NodeContext, stream: bool) -> DeltaFn | None:
    """Where a streamed answer's deltas go: `token` events of the node (None: not streamed)."""
    if not stream:
        return None

    def emit(index: int, text: str) -> None:
        ctx.emit("token", choice=index, text=text)

    return emit


async def _call(ctx: NodeContext, config: ChatConfig, request: ChatRequest) -> CallResult:

    gateway = ctx.service(MODELS)
    result = await gateway.chat(config.provider, request, _token_events(ctx, config.stream))
    ctx.record_usage(result.usage, result.call)
    return result


@block(
    "chat",
    category="llm",
    description="Ask a chat model; the prompt templates' variables are the input ports.",
    example="prompt 'Answer briefly: {{ question }}' -> the model's answer",
    dynamic_ports=_chat_ports,
    needs=(MODELS,),
)
async def chat(
    config: ChatConfig, ctx: NodeContext, history: History = None, **variables: Any
) -> str:
    """Sends the system prompt, any earlier messages from `history`, and the user prompt to a
    chat model, and returns its answer. Both prompts are Jinja2 templates: each variable they
    use (`{{ question }}`) is an input port. Tokens stream to the debug panel as they arrive;
    tokens and cost are counted per call. Answers from dagwright's scripted model are marked
    as scripted in the run's events."""
    result = await _call(ctx, config, _request(config, history, variables))
    return result.choices[0]


def _parse_json(text: str, schema: dict[str, Any] | None) -> Any:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(
            f"the model's answer is not valid JSON ({exc.msg} at line {exc.lineno}, column "
            f"{exc.colno}); it begins: {text[:120]!r}"
        ) from None
    if schema is not None:
        import jsonschema

        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(value)
        )
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(the answer)"
            raise ModelOutputError(
                f"the model's JSON does not match the schema at {where}: {error.message}"
            )
    return value


@block(
    "chat_json",
    category="llm",
    description="Ask a chat model for JSON; the answer is parsed (and checked by a schema).",
    example='prompt \'Extract {"name", "year"} from: {{ text }}\' -> {"name": "Tom", ...}',
    dynamic_ports=_chat_ports,
    needs=(MODELS,),
)
async def chat_json(
    config: ChatJsonConfig, ctx: NodeContext, history: History = None, **variables: Any
) -> Any:
    """Like `chat`, but asks for a JSON answer: with a `json_schema` the provider is asked to
    follow it (structured output) and the answer is checked against it; without one, JSON mode
    is requested. An answer that is not valid JSON, or does not match the schema, fails the
    node with the parse error and the start of the answer."""
    response_format: dict[str, Any] = {"type": "json_object"}
    if config.json_schema is not None:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": config.json_schema},
        }
    request = _request(config, history, variables, response_format=response_format)
    result = await _call(ctx, config, request)
    return _parse_json(result.choices[0], config.json_schema)


@block(
    "chat_samples",
    category="llm",
    description="Sample several answers from a chat model for the same prompt.",
    example="n 3, temperature 0.8 -> three candidate answers (for voting or critique)",
    dynamic_ports=_chat_ports,
    needs=(MODELS,),
)
async def chat_samples(
    config: ChatSamplesConfig, ctx: NodeContext, history: History = None, **variables: Any
) -> list[str]:
    """Asks the model for `n` answers in one call (the API's n parameter) and returns them
    as a list, e.g. for self-consistency voting. Tokens stream per answer."""
    result = await _call(ctx, config, _request(config, history, variables, n=config.n))
    return result.choices


@block(
    "chat_scored",
    category="llm",
    description="Sample answers with their log-probabilities (for votes weighted by them).",
    example="n 8 -> [{text: 'f_row([row 1])', logprob: -0.4, tokens: [...]}, ...]",
    dynamic_ports=_chat_ports,
    needs=(MODELS,),
)
async def chat_scored(
    config: ChatScoredConfig, ctx: NodeContext, history: History = None, **variables: Any
) -> list[dict[str, Any]]:
    """Like `chat_samples`, but asks the provider for token log-probabilities (the API's
    logprobs and top_logprobs) and returns each answer as {text, logprob, tokens}: logprob
    is the answer's log-probability, the sum over its tokens (None when the provider sends
    none); tokens are {token, logprob, top_logprobs}."""
    request = _request(
        config, history, variables, n=config.n, logprobs=True, top_logprobs=config.top_logprobs
    )
    result = await _call(ctx, config, request)
    return [
        {"text": text, "logprob": logprob, "tokens": tokens}
        for text, logprob, tokens in zip(
            result.choices, result.logprobs, result.token_logprobs, strict=True
        )
    ]


@block(
    "completion",
    category="llm",
    description="Continue a text with a completion model (where the provider offers it).",
    example="prompt 'SELECT name FROM' -> ' employees WHERE ...'",
    dynamic_ports=_completion_ports,
    needs=(MODELS,),
)
async def completion(config: CompletionConfig, ctx: NodeContext, **variables: Any) -> str:
    """Sends the rendered prompt to the provider's text-completion endpoint (/v1/completions)
    and returns the continuation. Most chat-only providers lack this endpoint; use `chat`."""

    gateway = ctx.service(MODELS)
    result = await gateway.complete(
        config.provider,
        render(config.prompt, variables, "prompt"),
        model=config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        stop=config.stop,
        on_delta=_token_events(ctx, config.stream),
    )
    ctx.record_usage(result.usage, result.call)
    return result.choices[0]


@block(
    "embedding",
    category="llm",
    description="Turn a text into an embedding vector.",
    example="'year-end bonus' -> [0.012, -0.094, ...]",
    needs=(MODELS,),
)
async def embedding(config: EmbeddingConfig, ctx: NodeContext, text: str) -> list[float]:
    """Embeds the text with the provider's embeddings endpoint and returns the vector."""
    if not text.strip():
        raise ValueError("cannot embed an empty text")

    gateway = ctx.service(MODELS)
    result = await gateway.embed(
        config.provider, [text], model=config.model, dimensions=config.dimensions
    )
    ctx.record_usage(result.usage, result.call)
    return result.vectors[0]

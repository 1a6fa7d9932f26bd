"""The OpenAI-compatible route called with the official `openai` client (sync and async,
plain and streamed): `model` names a published app. Models are answered by dagwright's
scripted model (the server's environment names no provider)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from support.server import LiveServer, echo_flow, edge, example, flow, live_server, node

QUESTION: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of France?"}
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", tmp_path_factory.mktemp("openai")) as running:
        yield running


@pytest.fixture(scope="module")
def echo_key(server: LiveServer) -> str:
    return server.api.published_app("oa-echo", echo_flow())


@pytest.fixture(scope="module")
def llm_key(server: LiveServer) -> str:
    return server.api.published_app("oa-llm", example("answer_question"))


def client(server: LiveServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=key, max_retries=0)


def async_client(server: LiveServer, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=key, max_retries=0)


def test_sync_client_plain(server: LiveServer, echo_key: str) -> None:
    conversation: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "ignored by this app"},
        {"role": "user", "content": "an earlier question"},
        {"role": "assistant", "content": "an earlier answer"},
        {"role": "user", "content": "hello there"},
    ]
    with client(server, echo_key) as oa:
        completion = oa.chat.completions.create(
            model="oa-echo", messages=conversation, temperature=0.2
        )
    assert completion.object == "chat.completion"
    assert completion.model == "oa-echo"
    assert len(completion.choices) == 1
    choice = completion.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Echo: hello there"  # the last user message
    run_id = completion.id.removeprefix("chatcmpl-")
    record = server.api.get_run(run_id)
    assert record["inputs"] == {"question": "hello there"}
    assert record["outputs"] == {"answer": "Echo: hello there"}


def test_sync_client_stream_of_a_flow_without_a_model(server: LiveServer, echo_key: str) -> None:
    with client(server, echo_key) as oa:
        chunks = list(oa.chat.completions.create(model="oa-echo", messages=QUESTION, stream=True))
    contents = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert "".join(contents) == "Echo: What is the capital of France?"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_sync_client_llm_flow(server: LiveServer, llm_key: str) -> None:
    with client(server, llm_key) as oa:
        completion = oa.chat.completions.create(model="oa-llm", messages=QUESTION)
        content = completion.choices[0].message.content
        assert content is not None
        assert content.startswith("[scripted reply]")
        assert completion.usage is not None
        assert completion.usage.completion_tokens > 0
        assert completion.usage.total_tokens == (
            completion.usage.prompt_tokens + completion.usage.completion_tokens
        )

        stream = oa.chat.completions.create(model="oa-llm", messages=QUESTION, stream=True)
        deltas = [c.choices[0].delta.content for c in stream if c.choices[0].delta.content]
    assert len(deltas) >= 3  # token by token, as the model node streams
    assert "".join(deltas) == content


async def test_async_client_plain_and_streamed(
    server: LiveServer, echo_key: str, llm_key: str
) -> None:
    async with async_client(server, echo_key) as oa:
        completion = await oa.chat.completions.create(
            model="oa-echo", messages=[{"role": "user", "content": "async"}], stream=False
        )
        assert completion.choices[0].message.content == "Echo: async"
    async with async_client(server, llm_key) as oa:
        stream = await oa.chat.completions.create(model="oa-llm", messages=QUESTION, stream=True)
        deltas = [c.choices[0].delta.content async for c in stream if c.choices[0].delta.content]
        plain = await oa.chat.completions.create(model="oa-llm", messages=QUESTION)
    assert len(deltas) >= 3
    assert "".join(deltas) == plain.choices[0].message.content


def test_client_errors(server: LiveServer, echo_key: str, llm_key: str) -> None:
    with client(server, "dw_not-a-real-key") as oa, pytest.raises(openai.AuthenticationError):
        oa.chat.completions.create(model="oa-echo", messages=QUESTION)
    with client(server, llm_key) as oa:
        with pytest.raises(openai.PermissionDeniedError):  # a key of another app
            oa.chat.completions.create(model="oa-echo", messages=QUESTION)
        with pytest.raises(openai.NotFoundError):
            oa.chat.completions.create(model="no-such-app", messages=QUESTION)

    two_inputs = flow(
        [
            node("a", "text_input", name="a"),
            node("b", "text_input", name="b"),
            node("t", "template", template="{{ a }}{{ b }}"),
            node("out", "output", name="answer"),
        ],
        [edge("a", "t.a"), edge("b", "t.b"), edge("t", "out")],
    )
    key = server.api.published_app("oa-two-inputs", two_inputs)
    with client(server, key) as oa, pytest.raises(openai.UnprocessableEntityError) as raised:
        oa.chat.completions.create(model="oa-two-inputs", messages=QUESTION)
    assert raised.value.status_code == 422


def test_a_failing_run(server: LiveServer) -> None:
    failing = flow(
        [
            node("q", "text_input", name="question"),
            node("t", "template", template="{{ question.no.such.attribute }}"),
            node("out", "output", name="answer"),
        ],
        [edge("q", "t.question"), edge("t", "out")],
    )
    key = server.api.published_app("oa-failing", failing)
    with client(server, key) as oa:
        with pytest.raises(openai.InternalServerError) as raised:
            oa.chat.completions.create(model="oa-failing", messages=QUESTION)
        assert "failed" in str(raised.value)
        chunks = list(
            oa.chat.completions.create(model="oa-failing", messages=QUESTION, stream=True)
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.startswith("[run failed: ")
    assert chunks[-1].choices[0].finish_reason == "stop"

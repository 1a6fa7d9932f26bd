"""The scripted model server over real HTTP, through the real `openai` client."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest

from dagwright.llm.scripted import Script, ScriptedServer

SCRIPT: dict[str, Any] = {
    "models": ["scripted", "extra-model"],
    "embedding_dimensions": 32,
    "rules": [
        {"name": "hello", "match": "(?i)^hello", "reply": "Hello there,  friend!\n"},
        {"name": "json", "match": "json please", "reply": '{"answer": 42}'},
        {"name": "samples", "match": "^sample", "reply": {"choices": ["red", "green"]}},
        {"name": "steps", "match": "^next step$", "replies": ["one", "two", "three"]},
        {"name": "ring", "match": "^ring$", "replies": ["tick", "tock"], "cycle": True},
        {"name": "planner", "model": "planner-*", "reply": "plan from the planner"},
        {"name": "judge", "model": "judge-v1", "match": "verdict", "reply": "guilty"},
        {
            "name": "bonus",
            "match": "(?i)year-end bonus",
            "reply": {"content": "bonus!", "usage": {"prompt_tokens": 10, "completion_tokens": 3}},
        },
        {
            "name": "rate",
            "match": "^rate me$",
            "reply": {"fault": "rate_limit", "retry_after": 1.5},
        },
        {"name": "boom", "match": "^crash$", "reply": {"fault": "server_error", "message": "oops"}},
        {"name": "garbled", "match": "^garble$", "reply": {"fault": "malformed"}},
        {"name": "refuse", "match": "^refuse$", "reply": {"fault": "bad_request", "message": "no"}},
        {"name": "stuck", "match": "^hang$", "reply": {"fault": "hang", "hang_seconds": 30}},
        {"name": "slow", "match": "^slow$", "reply": {"content": "done", "latency_ms": 200}},
        {
            "name": "fixed-vectors",
            "endpoint": "embeddings",
            "match": "^fixed$",
            "reply": {"vectors": [[1.0, 0.0], [0.0, 1.0]]},
        },
        {"name": "hashed", "endpoint": "embeddings", "reply": "unused"},
    ],
}


@pytest.fixture(scope="module")
def shared() -> Iterator[ScriptedServer]:
    with ScriptedServer(Script.model_validate(SCRIPT)) as server:
        yield server


@pytest.fixture
def server(shared: ScriptedServer) -> ScriptedServer:
    shared.reset()
    return shared


@pytest.fixture
async def client(server: ScriptedServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        yield c


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


async def test_plain_chat_is_marked_as_scripted(client: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello"},
    ]
    raw = await client.chat.completions.with_raw_response.create(
        model="scripted", messages=messages
    )
    assert raw.headers["x-dagwright-scripted"] == "1"
    completion = raw.parse()
    assert completion.id.startswith("scripted-")
    assert completion.system_fingerprint == "dagwright-scripted"
    assert completion.object == "chat.completion"
    assert completion.model == "scripted"
    [choice] = completion.choices
    assert choice.message.content == "Hello there,  friend!\n"
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == tokens("Be brief.") + tokens("hello") == 5
    assert completion.usage.completion_tokens == tokens("Hello there,  friend!\n") == 6
    assert completion.usage.total_tokens == 11


async def test_streamed_chat_reassembles_and_ends_with_usage(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(
        model="scripted",
        messages=user("Hello?"),
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert {chunk.id for chunk in chunks} == {chunks[0].id}
    assert chunks[0].id.startswith("scripted-")
    assert all(chunk.system_fingerprint == "dagwright-scripted" for chunk in chunks)
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    first = chunks[0].choices[0].delta
    assert (first.role, first.content) == ("assistant", "")
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert len([p for p in pieces if p]) == 4  # "Hello", " there,", "  friend!", "\n"
    assert "".join(pieces) == "Hello there,  friend!\n"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (2, 6)


async def test_stream_without_usage_option_sends_no_usage_chunk(
    client: openai.AsyncOpenAI,
) -> None:
    stream = await client.chat.completions.create(
        model="scripted", messages=user("hello"), stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.choices for chunk in chunks)
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_raw_event_stream_format(server: ScriptedServer) -> None:
    body = {"model": "scripted", "messages": user("hello"), "stream": True}
    async with (
        httpx.AsyncClient() as http,
        http.stream("POST", f"{server.base_url}/chat/completions", json=body) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-dagwright-scripted"] == "1"
        text = (await response.aread()).decode()
    events = text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    payloads = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert all(event.startswith("data: ") for event in events[:-1])
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert payloads[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }


async def test_n_samples_take_the_scripted_choices_in_turn(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(
        model="scripted", messages=user("sample three"), n=3
    )
    assert [c.index for c in completion.choices] == [0, 1, 2]
    assert [c.message.content for c in completion.choices] == ["red", "green", "red"]
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 1 + 2 + 1

    stream = await client.chat.completions.create(
        model="scripted", messages=user("sample three"), n=3, stream=True
    )
    texts = ["", "", ""]
    finished = set()
    async for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason is not None:
                finished.add(choice.index)
    assert texts == ["red", "green", "red"]
    assert finished == {0, 1, 2}


async def test_json_mode_echoes_the_scripted_json(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(
        model="scripted",
        messages=user("json please"),
        response_format={"type": "json_object"},
    )
    assert json.loads(completion.choices[0].message.content or "") == {"answer": 42}


async def test_legacy_completions(client: openai.AsyncOpenAI) -> None:
    completion = await client.completions.create(model="scripted", prompt="hello world")
    assert completion.id.startswith("scripted-")
    assert completion.system_fingerprint == "dagwright-scripted"
    assert completion.object == "text_completion"
    assert [c.text for c in completion.choices] == ["Hello there,  friend!\n"]
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == tokens("hello world") == 3

    several = await client.completions.create(model="scripted", prompt=["sample", "x"], n=2)
    assert [c.text for c in several.choices] == ["red", "green", "red", "green"]
    assert [c.index for c in several.choices] == [0, 1, 2, 3]


async def test_streamed_legacy_completion(client: openai.AsyncOpenAI) -> None:
    stream = await client.completions.create(
        model="scripted",
        prompt="hello",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.object == "text_completion" for chunk in chunks)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == "Hello there,  friend!\n"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 6


async def test_embeddings_are_deterministic_normalised_and_sized(
    client: openai.AsyncOpenAI,
) -> None:
    first = await client.embeddings.create(
        model="embedder", input=["The cat sat", "stock prices fell"], encoding_format="float"
    )
    again = await client.embeddings.create(
        model="embedder", input="the CAT sat", encoding_format="float"
    )
    assert first.model == "embedder"
    assert [item.index for item in first.data] == [0, 1]
    cat, stocks = (item.embedding for item in first.data)
    assert len(cat) == len(stocks) == 32  # the script's embedding_dimensions
    assert math.isclose(sum(v * v for v in cat), 1.0)
    assert math.isclose(sum(v * v for v in stocks), 1.0)
    assert again.data[0].embedding == cat  # lowercased word tokens: the same features
    assert cat != stocks
    assert first.usage.prompt_tokens == tokens("The cat sat") + tokens("stock prices fell")

    sized = await client.embeddings.create(model="embedder", input="The cat sat", dimensions=16)
    # The client's default transfer is base64 (float32); it decodes to the same unit vector.
    vector = sized.data[0].embedding
    assert len(vector) == 16
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-6)


async def test_embeddings_rule_with_explicit_vectors(client: openai.AsyncOpenAI) -> None:
    result = await client.embeddings.create(
        model="embedder", input=["fixed", "anything"], encoding_format="float"
    )
    assert [item.embedding for item in result.data] == [[1.0, 0.0], [0.0, 1.0]]

    with pytest.raises(openai.BadRequestError, match="2 vector\\(s\\) for 1 input"):
        await client.embeddings.create(model="embedder", input="fixed", encoding_format="float")


async def test_models_lists_script_models_and_exact_rule_models(
    client: openai.AsyncOpenAI,
) -> None:
    page = await client.models.list()
    assert [model.id for model in page.data] == ["scripted", "extra-model", "judge-v1"]
    assert {model.object for model in page.data} == {"model"}


async def test_sequences_repeat_the_last_reply_or_cycle(
    client: openai.AsyncOpenAI, server: ScriptedServer
) -> None:
    async def ask(text: str) -> str | None:
        completion = await client.chat.completions.create(model="scripted", messages=user(text))
        return completion.choices[0].message.content

    assert [await ask("next step") for _ in range(4)] == ["one", "two", "three", "three"]
    assert [await ask("ring") for _ in range(5)] == ["tick", "tock", "tick", "tock", "tick"]
    assert server.stats()["by_rule"] == {"steps": 4, "ring": 5}

    server.reset()
    assert await ask("next step") == "one"


async def test_model_globs_exact_models_and_regexes(client: openai.AsyncOpenAI) -> None:
    planned = await client.chat.completions.create(
        model="planner-large", messages=user("anything at all")
    )
    assert planned.choices[0].message.content == "plan from the planner"

    judged = await client.chat.completions.create(model="judge-v1", messages=user("the verdict?"))
    assert judged.choices[0].message.content == "guilty"
    with pytest.raises(openai.BadRequestError, match="no scripted reply matches"):
        await client.chat.completions.create(model="judge-v2", messages=user("the verdict?"))

    bonus = await client.chat.completions.create(
        model="scripted", messages=user("Is there a YEAR-END BONUS this time?")
    )
    assert bonus.choices[0].message.content == "bonus!"
    assert bonus.usage is not None
    assert (bonus.usage.prompt_tokens, bonus.usage.completion_tokens) == (10, 3)
    assert bonus.usage.total_tokens == 13


async def test_last_message_made_of_content_parts(client: openai.AsyncOpenAI) -> None:
    messages: list[Any] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}],
        }
    ]
    completion = await client.chat.completions.create(model="scripted", messages=messages)
    assert completion.choices[0].message.content == "Hello there,  friend!\n"


async def test_rate_limit_fault(client: openai.AsyncOpenAI, server: ScriptedServer) -> None:
    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model="scripted", messages=user("rate me"))
    error = caught.value
    assert error.status_code == 429
    assert error.response.headers["retry-after"] == "2"  # whole seconds, rounded up
    assert error.response.headers["retry-after-ms"] == "1500"
    assert error.response.headers["x-dagwright-scripted"] == "1"
    assert error.code == "rate_limit_exceeded"
    assert server.stats()["log"][-1]["fault"] == "rate_limit"
    assert server.stats()["log"][-1]["status"] == 429


async def test_server_error_and_bad_request_faults(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as crashed:
        await client.chat.completions.create(model="scripted", messages=user("crash"))
    assert crashed.value.status_code == 500
    assert crashed.value.message.endswith("oops")

    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="scripted", messages=user("refuse"))
    assert refused.value.status_code == 400
    assert refused.value.body == {
        "message": "no",
        "type": "invalid_request_error",
        "param": None,
        "code": "bad_request",
    }


async def test_malformed_fault_breaks_parsing(client: openai.AsyncOpenAI) -> None:
    raw = await client.chat.completions.with_raw_response.create(
        model="scripted", messages=user("garble")
    )
    assert raw.status_code == 200
    assert raw.headers["content-type"] == "application/json"
    assert raw.text.startswith('{"id": "scripted-')
    with pytest.raises((openai.APIResponseValidationError, json.JSONDecodeError)):
        await client.chat.completions.create(model="scripted", messages=user("garble"))
    stream = await client.chat.completions.create(
        model="scripted", messages=user("garble"), stream=True
    )
    with pytest.raises((openai.APIResponseValidationError, json.JSONDecodeError)):
        await anext(stream)


async def test_hang_times_out_the_client_without_blocking_others(
    client: openai.AsyncOpenAI, server: ScriptedServer
) -> None:
    async def hang() -> float:
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(
                model="scripted", messages=user("hang"), timeout=0.4
            )
        return time.monotonic() - started

    async def meanwhile() -> str | None:
        await asyncio.sleep(0.05)
        completion = await client.chat.completions.create(model="scripted", messages=user("hello"))
        return completion.choices[0].message.content

    waited, answer = await asyncio.gather(hang(), meanwhile())
    assert 0.35 < waited < 1.5
    assert answer is not None
    # The server notices that the client left and stops waiting for it.
    for _ in range(50):
        if server.stats()["in_flight"] == 0:
            break
        await asyncio.sleep(0.02)
    stats = server.stats()
    assert stats["in_flight"] == 0
    [hung] = [entry for entry in stats["log"] if entry["fault"] == "hang"]
    assert hung["status"] == 499


async def test_stop_is_prompt_with_a_request_hanging() -> None:
    script = Script.model_validate({"rules": [{"reply": {"fault": "hang"}}]})
    server = ScriptedServer(script).start()
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        request = asyncio.create_task(
            c.chat.completions.create(model="scripted", messages=user("wait"), timeout=30)
        )
        for _ in range(100):
            if server.stats()["in_flight"] == 1:
                break
            await asyncio.sleep(0.01)
        assert server.stats()["in_flight"] == 1
        started = time.monotonic()
        await asyncio.to_thread(server.stop)
        assert time.monotonic() - started < 2.0
        with pytest.raises((openai.InternalServerError, openai.APIConnectionError)):
            await request


async def test_api_key_is_enforced() -> None:
    script = Script.model_validate({"api_key": "sekret", "default_reply": "fine"})
    with ScriptedServer(script) as server:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key="wrong", max_retries=0
        ) as wrong:
            with pytest.raises(openai.AuthenticationError) as denied:
                await wrong.chat.completions.create(model="m", messages=user("hi"))
            assert denied.value.status_code == 401
            assert denied.value.code == "invalid_api_key"
            with pytest.raises(openai.AuthenticationError):
                await wrong.models.list()
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key="sekret", max_retries=0
        ) as right:
            completion = await right.chat.completions.create(model="m", messages=user("hi"))
            assert completion.choices[0].message.content == "fine"
        assert [entry["status"] for entry in server.stats()["log"]] == [401, 401, 200]


async def test_no_matching_rule_is_a_400_naming_model_and_message(
    client: openai.AsyncOpenAI, server: ScriptedServer
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model="scripted", messages=user("nothing is scripted for this")
        )
    assert caught.value.status_code == 400
    assert caught.value.message.endswith(
        "no scripted reply matches this request "
        "(model 'scripted', last message 'nothing is scripted for this')"
    )
    assert server.stats()["log"][-1] == {
        "endpoint": "chat",
        "model": "scripted",
        "last_message": "nothing is scripted for this",
        "rule": None,
        "fault": None,
        "status": 400,
    }


async def test_bad_bodies_and_unknown_routes_get_openai_errors(server: ScriptedServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        bad = await http.post(
            "/chat/completions", json={"model": "m", "messages": [{"role": "user"}], "n": 0}
        )
        unknown = await http.post("/nowhere", json={})
        not_json = await http.post(
            "/embeddings", content=b"{", headers={"content-type": "application/json"}
        )
    assert bad.status_code == 400
    assert bad.json() == {
        "error": {
            "message": "invalid request body: n: Input should be greater than or equal to 1",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_body",
        }
    }
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "Invalid URL (POST /v1/nowhere)"
    assert unknown.headers["x-dagwright-scripted"] == "1"
    assert not_json.status_code == 400
    assert not_json.json()["error"]["message"].startswith("the request body is not valid JSON")


async def test_stats_count_concurrency_rules_and_log(
    client: openai.AsyncOpenAI, server: ScriptedServer
) -> None:
    started = time.monotonic()
    answers = await asyncio.gather(
        *(client.chat.completions.create(model="scripted", messages=user("slow")) for _ in range(5))
    )
    assert time.monotonic() - started < 0.6  # the 200 ms waits overlapped
    assert {a.choices[0].message.content for a in answers} == {"done"}
    stats = server.stats()
    assert stats["requests"] == 5
    assert stats["in_flight"] == 0
    assert stats["max_in_flight"] == 5
    assert stats["by_rule"] == {"slow": 5}
    assert stats["log"][0] == {
        "endpoint": "chat",
        "model": "scripted",
        "last_message": "slow",
        "rule": "slow",
        "fault": None,
        "status": 200,
    }

    root = server.base_url.removesuffix("/v1")
    async with httpx.AsyncClient(base_url=root) as http:
        over_http = (await http.get("/_scripted/stats")).json()
        assert over_http == stats
        reset = await http.post("/_scripted/reset")
    assert reset.json() == {
        "requests": 0,
        "in_flight": 0,
        "max_in_flight": 0,
        "by_rule": {},
        "log": [],
    }
    assert server.stats()["requests"] == 0


class _WatchedHandler(logging.StreamHandler[io.StringIO]):
    """A handler that says whether it was closed (some, absl's, close their stream then)."""

    was_closed = False

    def close(self) -> None:
        self.was_closed = True
        super().close()


def test_starting_leaves_the_process_logging_alone() -> None:
    """The scripted server runs inside other programs (the CLI's demo, a server's scripted
    model): starting it closes and replaces none of their log handlers."""
    stream = io.StringIO()
    handler = _WatchedHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with ScriptedServer(Script.model_validate({"default_reply": "fine"})):
            pass
        assert not handler.was_closed
        assert handler in root.handlers
        root.warning("still logged")
        assert "still logged" in stream.getvalue()
    finally:
        root.removeHandler(handler)

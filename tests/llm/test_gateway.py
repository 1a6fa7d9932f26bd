"""The LLM gateway against the scripted server over real HTTP: plain and streamed chat, n
samples, every injected fault with the retries and backoff observed, the concurrency limit
measured at the server, accounting, and record-then-replay."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from pathlib import Path

import pytest

from dagwright.llm.gateway import ChatRequest, LLMError, LLMGateway, MissingKeyError
from dagwright.llm.providers import ProviderConfig, ProviderSettings, UnknownProviderError
from dagwright.llm.recording import Recorder
from dagwright.llm.scripted.replay import script_from_recording
from dagwright.llm.scripted.runner import ScriptedServer
from support.models import gateway_for, scripted_server


def ask(text: str, **params: object) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **params)  # type: ignore[arg-type]


SCRIPT = {
    "rules": [
        {"name": "bonus", "match": "(?i)bonus", "reply": "Tom's bonus is 12,000."},
        {"name": "samples", "match": "^sample", "replies": [{"choices": ["a", "b", "c"]}]},
    ],
    "default_reply": "scripted default",
}


async def test_plain_chat_with_accounting() -> None:
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server, price_input_per_1k=1.0, price_output_per_1k=2.0)
        try:
            result = await gateway.chat(None, ask("What is Tom's year-end bonus?"))
        finally:
            await gateway.aclose()
    assert result.choices == ["Tom's bonus is 12,000."]
    assert result.finish_reasons == ["stop"]
    assert result.scripted is True
    assert result.attempts == 1
    assert result.prompt_tokens > 0
    assert result.completion_tokens > 0
    assert result.tokens_estimated is False
    expected = (result.prompt_tokens * 1.0 + result.completion_tokens * 2.0) / 1000
    assert result.cost == pytest.approx(expected)
    assert result.usage.calls == 1


async def test_streamed_chat_delivers_deltas_in_order() -> None:
    deltas: list[tuple[int, str]] = []
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        try:
            result = await gateway.chat(
                None, ask("bonus?"), on_delta=lambda i, t: deltas.append((i, t))
            )
        finally:
            await gateway.aclose()
    assert len(deltas) > 1
    assert "".join(text for _, text in deltas) == "Tom's bonus is 12,000."
    assert result.choices == ["Tom's bonus is 12,000."]
    assert result.completion_tokens > 0  # the usage chunk arrived


async def test_n_samples() -> None:
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        try:
            plain = await gateway.chat(None, ask("sample please", n=3))
            streamed = await gateway.chat(
                None, ask("sample please", n=3), on_delta=lambda i, t: None
            )
        finally:
            await gateway.aclose()
    assert plain.choices == ["a", "b", "c"]
    assert streamed.choices == ["a", "b", "c"]


async def test_rate_limit_and_server_error_are_retried_with_backoff() -> None:
    script = {
        "rules": [
            {
                "match": "retry",
                "replies": [
                    {"fault": "rate_limit", "retry_after": 0.3},
                    {"fault": "server_error", "message": "overloaded"},
                    "finally",
                ],
            }
        ]
    }
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    with scripted_server(script) as server:
        gateway = gateway_for(server, backoff_base=0.1, backoff_max=5.0)
        gateway = LLMGateway(gateway.settings, sleep=sleep)
        try:
            result = await gateway.chat(None, ask("retry me"))
        finally:
            await gateway.aclose()
        assert server.stats()["requests"] == 3
    assert result.choices == ["finally"]
    assert result.attempts == 3
    assert len(waits) == 2
    assert waits[0] >= 0.3  # Retry-After honoured
    assert 0.1 <= waits[1] <= 0.2  # second retry: base * 2, jittered between half and all


async def test_faults_exhaust_attempts_with_the_providers_message() -> None:
    script = {
        "rules": [{"match": "down", "reply": {"fault": "server_error", "message": "db on fire"}}]
    }
    with scripted_server(script) as server:
        gateway = gateway_for(server, max_attempts=3, backoff_base=0.01)
        try:
            with pytest.raises(LLMError) as info:
                await gateway.chat(None, ask("down"))
        finally:
            await gateway.aclose()
        assert server.stats()["requests"] == 3
    assert (
        "provider 'scripted' failed after 3 attempt(s): HTTP 500: db on fire" in info.value.message
    )


async def test_hanging_provider_times_out_in_bounded_time() -> None:
    script = {"rules": [{"match": "hang", "reply": {"fault": "hang", "hang_seconds": 60}}]}
    with scripted_server(script) as server:
        gateway = gateway_for(server, timeout=0.3, max_attempts=2, backoff_base=0.01)
        began = time.perf_counter()
        try:
            with pytest.raises(LLMError, match=r"failed after 2 attempt\(s\): timed out"):
                await gateway.chat(None, ask("hang"))
        finally:
            await gateway.aclose()
        elapsed = time.perf_counter() - began
    assert 0.6 <= elapsed < 3


async def test_malformed_and_refused_responses_are_not_retried() -> None:
    script = {
        "rules": [
            {"match": "garbled", "reply": {"fault": "malformed"}},
            {"match": "bad", "reply": {"fault": "bad_request", "message": "max_tokens too large"}},
        ]
    }
    with scripted_server(script) as server:
        gateway = gateway_for(server)
        try:
            with pytest.raises(LLMError, match="not valid JSON"):
                await gateway.chat(None, ask("garbled"))
            with pytest.raises(
                LLMError, match="refused the request: HTTP 400: max_tokens too large"
            ):
                await gateway.chat(None, ask("bad"))
        finally:
            await gateway.aclose()
        assert server.stats()["requests"] == 2


async def test_concurrency_limit_is_respected_at_the_server() -> None:
    script = {"latency_ms": 100, "default_reply": "ok"}
    with scripted_server(script) as server:
        gateway = gateway_for(server, max_concurrency=3)
        try:
            results = await asyncio.gather(*(gateway.chat(None, ask(f"q{i}")) for i in range(12)))
        finally:
            await gateway.aclose()
        stats = server.stats()
    assert [r.choices for r in results] == [["ok"]] * 12
    assert stats["max_in_flight"] == 3
    assert gateway.max_in_flight["scripted"] == 3


async def test_keys_and_providers_are_checked() -> None:
    missing = ProviderConfig(
        name="real", base_url="http://127.0.0.1:9/v1", api_key_env="DW_TEST_NO_SUCH_KEY"
    )
    gateway = LLMGateway(ProviderSettings(providers={"real": missing}))
    with pytest.raises(MissingKeyError, match="DW_TEST_NO_SUCH_KEY, which is not set"):
        await gateway.chat("real", ask("hi"))
    with pytest.raises(UnknownProviderError, match=r"unknown provider 'nope' \(configured: real\)"):
        await gateway.chat("nope", ask("hi"))


async def test_embeddings_and_completions() -> None:
    with scripted_server({"default_reply": "continued"}) as server:
        gateway = gateway_for(server)
        try:
            embedded = await gateway.embed(None, ["year-end bonus", "year-end bonus", "salary"])
            completed = await gateway.complete(None, "SELECT")
            streamed: list[str] = []
            completed_streaming = await gateway.complete(
                None, "SELECT", on_delta=lambda i, t: streamed.append(t)
            )
        finally:
            await gateway.aclose()
    first, again, other = embedded.vectors
    assert first == again
    assert first != other
    assert sum(x * x for x in first) == pytest.approx(1.0)
    assert completed.choices == ["continued"]
    assert "".join(streamed) == "continued" == completed_streaming.choices[0]


async def test_record_then_replay_gives_identical_answers(tmp_path: Path) -> None:
    recording = tmp_path / "run.jsonl"
    questions = ["bonus for Tom?", "something else", "bonus for Tom?"]
    with scripted_server(SCRIPT) as server:
        gateway = LLMGateway(gateway_for(server).settings, recorder=Recorder(recording))
        try:
            first = [(await gateway.chat(None, ask(q))).choices for q in questions]
        finally:
            await gateway.aclose()
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert [line["endpoint"] for line in lines] == ["chat"] * 3
    assert lines[0]["request"]["messages"][0]["content"] == "bonus for Tom?"
    replayed = ScriptedServer(script_from_recording(recording)).start()
    try:
        gateway = gateway_for(replayed)
        try:
            second = [(await gateway.chat(None, ask(q))).choices for q in questions]
        finally:
            await gateway.aclose()
    finally:
        replayed.stop()
    assert second == first


async def test_a_refused_key_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DW_TEST_WRONG_KEY", "sk-wrong-0123456789")
    with scripted_server({"api_key": "sk-right", "default_reply": "ok"}) as server:
        provider = ProviderConfig(
            name="guarded", base_url=server.base_url, api_key_env="DW_TEST_WRONG_KEY"
        )
        gateway = LLMGateway(ProviderSettings(providers={"guarded": provider}))
        try:
            with pytest.raises(LLMError) as info:
                await gateway.chat(None, ask("hi"))
        finally:
            await gateway.aclose()
    assert "refused the request: HTTP 401" in info.value.message
    assert "sk-wrong" not in info.value.message
    assert "sk-wrong" not in repr(provider)


async def test_azure_provider_uses_the_azure_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DW_TEST_AZURE_KEY", "azure-key-not-real")
    script = {"rules": [{"model": "my-gpt4o-deployment", "reply": "from the deployment"}]}
    with scripted_server(script) as server:
        azure = ProviderConfig(
            name="azure",
            kind="azure",
            base_url=server.base_url.removesuffix("/v1"),
            api_version="2024-10-21",
            api_key_env="DW_TEST_AZURE_KEY",
            default_model="my-gpt4o-deployment",
        )
        gateway = LLMGateway(ProviderSettings(providers={"azure": azure}))
        try:
            plain = await gateway.chat("azure", ask("hi"))
            streamed = await gateway.chat("azure", ask("hi"), on_delta=lambda i, t: None)
        finally:
            await gateway.aclose()
        log = server.stats()["log"]
    assert plain.choices == streamed.choices == ["from the deployment"]
    assert [entry["endpoint"] for entry in log] == ["chat", "chat"]


class _CraftedAnswers(http.server.BaseHTTPRequestHandler):
    """A provider whose answers name a choice that was not asked for."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        choice = {"index": 3, "message": {"role": "assistant", "content": "x"}, "delta": {}}
        if body.get("stream"):
            choice["delta"] = {"content": "x"}
            payload = f"data: {json.dumps({'choices': [choice]})}\n\ndata: [DONE]\n\n".encode()
            kind = "text/event-stream"
        else:
            choice["index"] = -1  # would silently overwrite the last choice
            payload = json.dumps({"choices": [choice]}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_a_choice_index_not_asked_for_is_a_malformed_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CRAFTED_KEY", "k")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CraftedAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    config = ProviderConfig(
        name="crafted", base_url=base_url, api_key_env="CRAFTED_KEY", max_attempts=1
    )
    gateway = LLMGateway(ProviderSettings().with_provider(config, default=True))
    try:
        with pytest.raises(LLMError, match=r"'crafted' .*a choice index -1 \(asked for 1\)"):
            await gateway.chat(None, ask("q"))
        with pytest.raises(LLMError, match=r"'crafted' .*a choice index 3 \(asked for 1\)"):
            await gateway.chat(None, ask("q"), on_delta=lambda i, t: None)
    finally:
        await gateway.aclose()
        server.shutdown()

"""Runs of a real server export their traces over OTLP/HTTP to a real receiver (a loopback
HTTP server decoding the protobuf payloads): run, node, iteration and model-call spans with
the GenAI attributes, errors as span events, an incoming `traceparent` honoured, and apps
invoking apps in one trace."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from otlp_receiver import Collector, ReceivedSpan, otlp_collector

from support.server import Api, LiveServer, edge, example, flow, key_headers, live_server, node

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
ERROR = 2
SERVER = 2


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    with otlp_collector() as running:
        yield running


@pytest.fixture(scope="module")
def server(collector: Collector, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGWRIGHT_OTLP_ENDPOINT", collector.url)
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within the test's patience
        env.delenv("OTEL_SERVICE_NAME", raising=False)
        with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
            yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def _run_span(run_id: str) -> Callable[[list[ReceivedSpan]], bool]:
    return lambda spans: any(s.attributes.get("dagwright.run.id") == run_id for s in spans)


def _trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == trace_id]


def test_a_published_run_exports_its_whole_trace_under_the_callers_span(
    api: Api, collector: Collector
) -> None:
    key = api.published_app("classify", example("classify_questions"))
    questions = ["How many rows?", "Who earns most?"]
    response = api.http.post(
        "/api/v1/apps/classify/run",
        json={"inputs": {"questions": questions}},
        headers={**key_headers(key), "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"},
    )
    result = response.json()
    assert result["status"] == "succeeded", result
    spans = _trace(collector.wait_for(_run_span(result["run_id"])), TRACE_ID)
    by_name = {s.name: s for s in spans}

    run = by_name["run classify_questions"]
    assert run.parent_span_id == CALLER_SPAN  # under the caller's span, in the caller's trace
    assert run.kind == SERVER
    assert run.service == "dagwright"
    assert run.attributes["dagwright.run.mode"] == "published"
    assert run.attributes["dagwright.status"] == "succeeded"
    assert run.attributes["dagwright.usage.calls"] == 2

    mapped = by_name["node classify_each"]
    assert mapped.parent_span_id == run.span_id
    assert mapped.attributes["dagwright.block"] == "map"
    for index, _ in enumerate(questions):
        iteration = by_name[f"iteration classify_each[{index}]"]
        assert iteration.parent_span_id == mapped.span_id
        assert iteration.attributes["dagwright.iteration"] == index
        ask = by_name[f"node classify_each[{index}]/ask"]
        assert ask.parent_span_id == iteration.span_id
        assert mapped.start <= iteration.start <= ask.start <= ask.end <= iteration.end
        calls = [s for s in spans if s.parent_span_id == ask.span_id]
        assert len(calls) == 1
        call = calls[0]
        model = call.attributes["gen_ai.request.model"]
        assert call.name == f"chat {model}"
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert call.attributes["gen_ai.usage.output_tokens"] > 0
        assert "dagwright.usage.cost" in call.attributes
        assert call.attributes["dagwright.scripted"] is True
        assert ask.start <= call.start <= call.end <= ask.end
    assert run.start <= mapped.start
    assert mapped.end <= run.end


def test_an_app_invoking_an_app_stays_in_one_trace(api: Api, collector: Collector) -> None:
    api.published_app("greeter", example("hello"))
    caller = flow(
        [
            node("name", "text_input", name="name"),
            node("call", "invoke_app", app="greeter", inputs=["name"], output="greeting"),
            node("out", "output", name="answer"),
        ],
        [edge("name", "call.name"), edge("call", "out")],
    )
    key = api.published_app("caller", caller)
    result = api.run("caller", key, {"name": "Ann"}).json()
    assert result["status"] == "succeeded"
    child_id = api.http.get("/api/v1/runs", params={"app": "greeter"}).json()["items"][0]["id"]

    spans = collector.wait_for(
        lambda found: _run_span(result["run_id"])(found) and _run_span(child_id)(found)
    )
    runs = {s.attributes.get("dagwright.run.id"): s for s in spans if s.name.startswith("run ")}
    parent, child = runs[result["run_id"]], runs[child_id]
    assert parent.parent_span_id == ""  # no traceparent: a trace of its own
    assert child.trace_id == parent.trace_id
    call = next(s for s in _trace(spans, parent.trace_id) if s.name == "node call")
    assert child.parent_span_id == call.span_id
    assert child.attributes["dagwright.run.mode"] == "invoke"
    greet = next(s for s in _trace(spans, parent.trace_id) if s.name == "node greet")
    assert greet.parent_span_id == child.span_id


def test_a_failure_is_an_error_status_with_an_exception_event(
    api: Api, collector: Collector
) -> None:
    broken = flow(
        [
            node("name", "text_input", name="name"),
            node("call", "invoke_app", app="nowhere-to-be-found", inputs=["name"]),
            node("out", "output", name="answer"),
        ],
        [edge("name", "call.name"), edge("call", "out")],
    )
    key = api.published_app("broken", broken)
    result = api.run("broken", key, {"name": "Ann"}).json()
    assert result["status"] == "failed"
    spans = collector.wait_for(_run_span(result["run_id"]))
    run = next(s for s in spans if s.attributes.get("dagwright.run.id") == result["run_id"])
    assert run.status_code == ERROR
    assert run.attributes["dagwright.error.node"] == "call"
    call = next(s for s in _trace(spans, run.trace_id) if s.name == "node call")
    assert call.status_code == ERROR
    [(name, attributes)] = call.events
    assert name == "exception"
    assert "nowhere-to-be-found" in attributes["exception.message"]
    assert attributes["exception.type"]


def test_a_run_resumed_after_a_human_answer_continues_the_same_trace(
    api: Api, collector: Collector
) -> None:
    asking = flow(
        [
            node("q", "text_input", name="q"),
            node("ask", "human_input", message="OK? {{ q }}", inputs=["q"]),
            node("echo", "template", template="answered: {{ a.note }}"),
            node("out", "output", name="answer"),
        ],
        [edge("q", "ask.q"), {**edge("ask", "echo.a"), "branch": "answered"}, edge("echo", "out")],
    )
    asking["nodes"][1]["config"]["fields"] = [{"name": "note"}]
    key = api.published_app("asking", asking)
    paused = api.run("asking", key, {"q": "go"}).json()
    assert paused["status"] == "waiting"
    items = api.http.get("/api/v1/human/requests").json()["items"]
    [request] = [r for r in items if r["run_id"] == paused["run_id"]]
    answered = api.http.post(
        f"/api/v1/human/requests/{request['id']}/answer", json={"values": {"note": "yes"}}
    )
    resumed_id = answered.json()["run_id"]
    assert api.wait_for_run(resumed_id)["outputs"] == {"answer": "answered: yes"}

    spans = collector.wait_for(
        lambda found: _run_span(paused["run_id"])(found) and _run_span(resumed_id)(found)
    )
    runs = {s.attributes.get("dagwright.run.id"): s for s in spans if s.name.startswith("run ")}
    waiting, resumed = runs[paused["run_id"]], runs[resumed_id]
    assert waiting.attributes["dagwright.status"] == "waiting"
    assert waiting.status_code != ERROR
    ask = next(s for s in _trace(spans, waiting.trace_id) if s.name == "node ask")
    assert ask.status_code != ERROR
    assert [name for name, _ in ask.events] == ["waiting_for_human"]
    assert resumed.trace_id == waiting.trace_id
    assert resumed.parent_span_id == ask.span_id
    assert resumed.attributes["dagwright.run.mode"] == "resume"
    echo = next(s for s in _trace(spans, waiting.trace_id) if s.name == "node echo")
    assert echo.parent_span_id == resumed.span_id


def test_a_map_item_waiting_for_a_person_is_no_error(api: Api, collector: Collector) -> None:
    one = {
        "nodes": [
            node("draft", "text_input", name="draft"),
            node("ask", "human_input", message="Approve {{ d }}?", inputs=["d"]),
            node("verdict", "output", name="verdict"),
        ],
        "edges": [edge("draft", "ask.d"), {**edge("ask", "verdict"), "branch": "answered"}],
    }
    document = flow(
        [
            node("drafts", "list_input", name="drafts"),
            node("each", "map", subflow="one", item="draft", output="verdict"),
            node("out", "output", name="verdicts"),
        ],
        [edge("drafts", "each.items"), edge("each", "out")],
    )
    document["subflows"] = {"one": one}
    key = api.published_app("asking-each", document)
    paused = api.run("asking-each", key, {"drafts": ["memo"]}).json()
    assert paused["status"] == "waiting"
    spans = collector.wait_for(_run_span(paused["run_id"]))
    run = next(s for s in spans if s.attributes.get("dagwright.run.id") == paused["run_id"])
    item = next(s for s in _trace(spans, run.trace_id) if s.name == "iteration each[0]")
    assert item.status_code != ERROR
    assert item.attributes["dagwright.status"] == "waiting"
    assert [name for name, _ in item.events] == ["waiting_for_human"]
    each = next(s for s in _trace(spans, run.trace_id) if s.name == "node each")
    assert each.status_code != ERROR

"""Runs over real HTTP, on SQLite and PostgreSQL: debug runs of unsaved flows and of saved
versions, listing with filters and pages, cancelling, and following a live run (with
Last-Event-ID)."""

from __future__ import annotations

import threading
import time

from support.server import (
    Api,
    Event,
    error_of,
    example,
    key_headers,
    parse_sse,
    slow_flow,
    sse_events,
)


def start_async(api: Api, slug: str, key: str, value: str = "v") -> str:
    response = api.run(slug, key, {"value": value}, **{"async": True})
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


# -- debug runs -------------------------------------------------------------------------------


def test_debug_run_of_an_unsaved_flow(api: Api) -> None:
    plain = api.http.post(
        "/api/v1/runs/debug",
        json={"flow": example("hello"), "inputs": {"name": "Dee"}, "stream": False},
    )
    assert plain.status_code == 200
    result = plain.json()
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"greeting": "Hello, Dee!"}
    assert result["app_id"] is None
    assert result["version_id"] is None
    record = api.get_run(result["run_id"])
    assert record["mode"] == "debug"
    assert [n["node"] for n in record["nodes"]] == ["name", "greet", "greeting"]

    with api.http.stream(
        "POST", "/api/v1/runs/debug", json={"flow": example("hello"), "inputs": {"name": "Eve"}}
    ) as response:  # stream is the default for debug runs
        events = sse_events(response)
    assert events[0].event == "run_started"
    assert [e.event for e in events[-2:]] == ["run_finished", "result"]
    assert events[-1].data["outputs"] == {"greeting": "Hello, Eve!"}
    assert {e.data["node"] for e in events if e.event == "node_finished"} == {
        "name",
        "greet",
        "greeting",
    }


def test_debug_run_recorded_under_an_app(api: Api) -> None:
    api.create_app("debugged")
    response = api.http.post(
        "/api/v1/runs/debug",
        json={"flow": example("hello"), "app": "debugged", "stream": False},
    )
    assert response.status_code == 200
    assert response.json()["app_id"] == api.http.get("/api/v1/apps/debugged").json()["id"]
    listed = api.http.get("/api/v1/runs", params={"app": "debugged", "mode": "debug"}).json()
    assert [r["id"] for r in listed["items"]] == [response.json()["run_id"]]
    unknown = api.http.post(
        "/api/v1/runs/debug", json={"flow": example("hello"), "app": "nobody", "stream": False}
    )
    assert error_of(unknown, 404)["code"] == "app_not_found"


def test_debug_run_refuses_invalid_flows_and_inputs(api: Api) -> None:
    broken = example("hello")
    broken["nodes"][1]["block"] = "no_such_block"
    invalid = api.http.post("/api/v1/runs/debug", json={"flow": broken, "stream": False})
    error = error_of(invalid, 422)
    assert error["code"] == "flow_invalid"
    assert {(p["node"], p["code"]) for p in error["problems"]} >= {("greet", "unknown_block")}
    bad_input = api.http.post(
        "/api/v1/runs/debug", json={"flow": example("hello"), "inputs": {"x": 1}, "stream": False}
    )
    assert error_of(bad_input, 422)["code"] == "invalid_input"


def test_run_of_a_saved_version(api: Api) -> None:
    api.create_app("versioned-run")
    api.save("versioned-run", example("hello"))
    changed = example("hello")
    changed["nodes"][1]["config"]["template"] = "v2 {{ name }}"
    two = api.save("versioned-run", changed)
    ran = api.http.post(
        "/api/v1/apps/versioned-run/versions/2/run", json={"inputs": {"name": "Flo"}}
    )
    assert ran.status_code == 200
    assert ran.json()["outputs"] == {"greeting": "v2 Flo"}
    assert ran.json()["version_id"] == two["id"]
    first = api.http.post(
        "/api/v1/apps/versioned-run/versions/1/run", json={"inputs": {"name": "Flo"}}
    )
    assert first.json()["outputs"] == {"greeting": "Hello, Flo!"}
    with api.http.stream(
        "POST",
        "/api/v1/apps/versioned-run/versions/2/run",
        json={"inputs": {"name": "Gus"}, "stream": True},
    ) as response:
        events = sse_events(response)
    assert events[-1].event == "result"
    assert events[-1].data["outputs"] == {"greeting": "v2 Gus"}
    missing = api.http.post("/api/v1/apps/versioned-run/versions/9/run", json={})
    assert error_of(missing, 404)["code"] == "version_not_found"
    record = api.get_run(ran.json()["run_id"])
    assert record["mode"] == "debug"
    assert record["version_id"] == two["id"]


# -- listing ----------------------------------------------------------------------------------


def test_list_runs_filters_and_pages(api: Api) -> None:
    key = api.published_app("listed", example("hello"))
    ids = [api.run("listed", key, {"name": f"n{i}"}).json()["run_id"] for i in range(5)]
    failing = example("hello")
    failing["nodes"][1]["config"]["template"] = "{{ name.nope.deeper }}"
    api.save("listed", failing)
    failed = api.http.post("/api/v1/apps/listed/versions/2/run", json={}).json()
    assert failed["status"] == "failed"

    every = api.http.get("/api/v1/runs", params={"app": "listed"}).json()
    assert every["total"] == 6
    succeeded = api.http.get("/api/v1/runs", params={"app": "listed", "status": "succeeded"})
    assert succeeded.json()["total"] == 5
    seen: list[str] = []
    for offset in (0, 2, 4):
        page = api.http.get(
            "/api/v1/runs",
            params={"app": "listed", "status": "succeeded", "offset": offset, "limit": 2},
        ).json()
        assert page["total"] == 5
        assert (page["offset"], page["limit"]) == (offset, 2)
        assert all(r["status"] == "succeeded" for r in page["items"])
        assert all(r["nodes"] == [] for r in page["items"])  # lists carry no traces
        seen.extend(r["id"] for r in page["items"])
    assert seen == list(reversed(ids))  # newest first, each once
    only_failed = api.http.get("/api/v1/runs", params={"app": "listed", "status": "failed"})
    assert [r["id"] for r in only_failed.json()["items"]] == [failed["run_id"]]
    published = api.http.get("/api/v1/runs", params={"app": "listed", "mode": "published"})
    assert published.json()["total"] == 5
    assert error_of(api.http.get("/api/v1/runs", params={"app": "nobody"}), 404)["code"] == (
        "app_not_found"
    )
    assert api.http.get("/api/v1/runs", params={"limit": 0}).status_code == 422
    assert error_of(api.http.get("/api/v1/runs/no-such-run"), 404)["code"] == "run_not_found"


# -- cancelling -------------------------------------------------------------------------------


def test_cancel_a_slow_run(api: Api) -> None:
    key = api.published_app("cancelled", slow_flow(30))
    run_id = start_async(api, "cancelled", key)
    api.wait_for_run(run_id, lambda r: any(n["node"] == "quick" for n in r["nodes"]))
    started = time.monotonic()
    response = api.http.post(f"/api/v1/runs/{run_id}/cancel")
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 5
    body = response.json()
    assert body["status"] == "cancelled"
    assert body["cancel_requested_at"] is not None
    record = api.get_run(run_id)
    assert record["status"] == "cancelled"
    assert record["error"]["code"] == "cancelled"
    statuses = {n["node"]: n["status"] for n in record["nodes"]}
    assert statuses["quick"] == "succeeded"
    assert statuses["slow"] == "cancelled"
    again = api.http.post(f"/api/v1/runs/{run_id}/cancel")
    assert error_of(again, 409)["code"] == "run_finished"
    unknown = api.http.post("/api/v1/runs/no-such-run/cancel")
    assert error_of(unknown, 404)["code"] == "run_not_found"


# -- following a live run ---------------------------------------------------------------------


def follow(api: Api, run_id: str, last_event_id: str | None = None) -> list[Event]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    with api.http.stream("GET", f"/api/v1/runs/{run_id}/events", headers=headers) as response:
        return sse_events(response)


def test_follow_a_live_run_and_resume(api: Api) -> None:
    key = api.published_app("followed", slow_flow(0.8))
    run_id = start_async(api, "followed", key)
    events: list[Event] = []
    resumed: list[Event] = []

    def resume() -> None:
        # Another client that saw events up to id 2 and reconnects.
        resumed.extend(follow(api, run_id, last_event_id="2"))

    other = threading.Thread(target=resume)
    other.start()
    events = follow(api, run_id)
    other.join(10)
    kinds = [e.event for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-2:] == ["run_finished", "result"]
    assert ("node_started", "slow") in [(e.event, e.data.get("node")) for e in events]
    assert [e.id for e in events] == [str(i) for i in range(len(events))]
    assert events[-1].data["status"] == "succeeded"
    assert events[-1].data["outputs"] == {"value": "quick:v"}
    # Resumed after id 2: exactly the later events.
    assert [e.id for e in resumed] == [e.id for e in events[3:]]
    assert [e.event for e in resumed] == kinds[3:]

    finished = follow(api, run_id)  # a finished run answers with its record
    assert [e.event for e in finished] == ["run_record"]
    assert finished[0].data["status"] == "succeeded"
    assert [n["node"] for n in finished[0].data["nodes"]] == ["inp", "quick", "slow", "out"]
    # The app's key may follow its own runs.
    with api.http.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers=key_headers(key)
    ) as response:
        assert [e.event for e in parse_sse(response.iter_lines())] == ["run_record"]
    missing = api.http.get("/api/v1/runs/no-such-run/events")
    assert error_of(missing, 404)["code"] == "run_not_found"


def test_a_client_leaving_a_stream_does_not_stop_the_run(api: Api) -> None:
    key = api.published_app("abandoned", slow_flow(0.4))
    with api.http.stream(
        "POST",
        "/api/v1/apps/abandoned/run",
        json={"inputs": {"value": "left"}, "stream": True},
        headers=key_headers(key),
    ) as response:
        first = next(parse_sse(response.iter_lines()))
    assert first.event == "run_started"
    run_id = first.data["run_id"]
    record = api.wait_for_run(run_id)
    assert record["status"] == "succeeded"
    assert record["outputs"] == {"value": "quick:left"}


# -- re-running from a node -------------------------------------------------------------------


def _stamped_flow(template: str) -> dict[str, object]:
    """now (microseconds, so every real run differs) -> template -> output."""
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "stamped",
        "nodes": [
            {"id": "clock", "block": "now", "config": {"format": "%H:%M:%S.%f"}},
            {"id": "line", "block": "template", "config": {"template": template}},
            {"id": "out", "block": "output", "config": {"name": "line"}},
        ],
        "edges": [
            {
                "source": {"node": "clock", "port": "output"},
                "target": {"node": "line", "port": "t"},
            },
            {
                "source": {"node": "line", "port": "output"},
                "target": {"node": "out", "port": "value"},
            },
        ],
    }


def test_rerun_from_a_node_reuses_the_outputs_before_it(api: Api) -> None:
    first = api.http.post(
        "/api/v1/runs/debug", json={"flow": _stamped_flow("at {{ t }}"), "stream": False}
    ).json()
    stamp = first["outputs"]["line"].removeprefix("at ")
    time.sleep(0.01)

    # The template changed on the canvas; the clock is upstream of it, so it is not run again.
    body = {
        "flow": _stamped_flow("still {{ t }}"),
        "reuse": {"run_id": first["run_id"], "from_node": "line"},
    }
    with api.http.stream("POST", "/api/v1/runs/debug", json=body) as response:
        events = sse_events(response)
    finished = {e.data["node"]: e.data for e in events if e.event == "node_finished"}
    assert finished["clock"]["reused"] is True
    assert finished["line"]["reused"] is False
    assert not [e for e in events if e.event == "node_started" and e.data["node"] == "clock"]
    assert events[-1].data["outputs"] == {"line": f"still {stamp}"}
    statuses = {n["node"]: n["status"] for n in api.get_run(events[-1].data["run_id"])["nodes"]}
    assert statuses == {"clock": "reused", "line": "succeeded", "out": "succeeded"}

    # From the first node nothing is reused: the clock runs again and gives a new time.
    again = api.http.post(
        "/api/v1/runs/debug",
        json={**body, "reuse": {"run_id": first["run_id"], "from_node": "clock"}, "stream": False},
    ).json()
    assert again["outputs"]["line"] != f"still {stamp}"


def test_rerun_from_an_unknown_node_or_run_is_refused(api: Api) -> None:
    first = api.http.post(
        "/api/v1/runs/debug", json={"flow": _stamped_flow("{{ t }}"), "stream": False}
    ).json()
    flow = _stamped_flow("{{ t }}")
    unknown_node = api.http.post(
        "/api/v1/runs/debug",
        json={"flow": flow, "reuse": {"run_id": first["run_id"], "from_node": "nope"}},
    )
    assert "nope" in error_of(unknown_node, 422)["message"]
    unknown_run = api.http.post(
        "/api/v1/runs/debug",
        json={"flow": flow, "reuse": {"run_id": "missing", "from_node": "line"}},
    )
    assert error_of(unknown_run, 404)["code"] == "run_not_found"


def test_stored_trace_labels_scripted_answers(api: Api) -> None:
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "ask",
        "nodes": [
            {"id": "q", "block": "text_input", "config": {"name": "q"}},
            {"id": "ask", "block": "chat", "config": {"prompt": "hello {{ q }}"}},
            {"id": "out", "block": "output", "config": {"name": "answer"}},
        ],
        "edges": [
            {"source": {"node": "q", "port": "output"}, "target": {"node": "ask", "port": "q"}},
            {
                "source": {"node": "ask", "port": "output"},
                "target": {"node": "out", "port": "value"},
            },
        ],
    }
    result = api.http.post(
        "/api/v1/runs/debug", json={"flow": flow, "inputs": {"q": "Ann"}, "stream": False}
    ).json()
    nodes = {n["node"]: n for n in api.get_run(result["run_id"])["nodes"]}
    assert nodes["ask"]["usage"]["scripted"] is True
    assert nodes["ask"]["usage"]["model"]
    assert nodes["ask"]["usage"]["calls"] == 1
    assert nodes["q"]["usage"] is None


DEMO_QUESTION = "What is the year-end bonus for Tom?"  # one the scripted model knows


def test_a_model_call_streams_as_a_usage_message_and_is_stored_with_its_node(api: Api) -> None:
    body = {"flow": example("answer_question"), "inputs": {"question": DEMO_QUESTION}}
    with api.http.stream("POST", "/api/v1/runs/debug", json=body) as response:
        events = sse_events(response)
    usage = [e.data for e in events if e.event == "node_message" and e.data["kind"] == "usage"]
    assert len(usage) == 1
    data = usage[0]["data"]
    assert usage[0]["node"] == "answer"
    assert (data["provider"], data["scripted"], data["calls"]) == ("scripted", True, 1)
    assert data["prompt_tokens"] > 0
    assert {"model", "latency", "attempts", "tokens_estimated", "cost"} <= set(data)
    record = api.get_run(events[-1].data["run_id"])
    assert record["usage"] == {
        "prompt_tokens": data["prompt_tokens"],
        "completion_tokens": data["completion_tokens"],
        "cost": data["cost"],
        "calls": 1,
    }
    stored = {n["node"]: n for n in record["nodes"]}["answer"]["usage"]
    assert stored == {**record["usage"], "model": data["model"], "scripted": True}

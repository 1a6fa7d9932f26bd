"""The whole API fuzzed from its own OpenAPI document (schemathesis), against a `dagwright
serve` process: whatever a caller sends, valid or not, the answer is never a 5xx (issue 13,
finding 7: 27,588 requests once found 53).

Bounded to a few minutes on two cores: a handful of examples per operation, derandomized so
a run is repeatable. Two passes: path parameters as generated (mostly unknown names: the
refusals), then bound to seeded objects (an app with a published version and a key, an
example namespace, a data source, a hint), so the operations behind a lookup run too. The
admin API is open (a loopback server without a token); the published routes get the seeded
app's key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from support.probe import health_probe
from support.server import Api, ServerProcess, echo_flow, key_headers

APP = "fuzz-app"
# Seconds a single request may take before the fuzz run fails: no request should hang.
REQUEST_TIMEOUT_S = 30.0
FUZZ_SETTINGS = settings(
    max_examples=10,
    derandomize=True,  # the same cases every run: a failure is reproducible
    deadline=None,
    database=None,  # nothing replayed from earlier runs' failures: each run is the same
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def seeded(server_process: ServerProcess) -> Iterator[dict[str, Any]]:
    """Objects for path parameters to name, and the app's API key."""
    api = Api(server_process.base_url)
    try:
        key = api.published_app(APP, echo_flow())
        namespace = {
            "name": "fuzz_ns",
            "embedder": "hashing:64",
            "key_fields": ["q"],
            "text_field": "q",
        }
        assert api.http.post("/api/v1/namespaces", json=namespace).status_code == 201
        source = {"kind": "memory", "config": {"tables": {"people": [{"name": "Ann"}]}}}
        assert api.http.put("/api/v1/sources/fuzz_src", json=source).status_code == 200
        hint = api.http.post("/api/v1/tqa/hints", json={"dataset": "fuzz", "text": "a hint"})
        assert hint.status_code == 201, hint.text
        run = api.run(APP, key, {"question": "seed"})
        assert run.status_code == 200, run.text
        # The first question publishes the AutoTQA agents and loads the data layer: a cold
        # start that holds the server up to ~1.5 s (reported; not what this test measures).
        # (The offline demo's script answers only its own questions: one of those.)
        warm = api.http.post(
            "/api/v1/tqa/ask",
            json={"question": "What is the year-end bonus for Tom?", "max_rounds": 1},
        )
        assert warm.status_code == 200, warm.text
        yield {
            "key": key,
            "run_id": run.json()["run_id"],
            "hint_id": hint.json()["id"],
            "version": run.json()["version_id"],
        }
    finally:
        api.close()


def _operations(server_process: ServerProcess) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{server_process.base_url}/openapi.json")
    schema.config.update(base_url=server_process.base_url, request_timeout=REQUEST_TIMEOUT_S)
    operations = []
    for result in schema.get_all_operations():
        # A part of the document schemathesis cannot read is a failure, not a gap.
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    return operations


def _fuzz(
    operations: list[Any], headers: dict[str, str], bind: dict[str, str] | None = None
) -> list[str]:
    """Every operation, valid and invalid requests: what answered 5xx (the case as curl)."""
    failures: list[str] = []
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
            operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
        )

        @FUZZ_SETTINGS
        @given(case=strategy)
        def call(case: schemathesis.Case[Any]) -> None:
            if bind and case.path_parameters:
                for name in case.path_parameters:
                    if name in bind:
                        case.path_parameters[name] = bind[name]
            case.call_and_validate(headers=headers, checks=[not_a_server_error])

        try:
            call()
        except Exception as exc:  # a 5xx (schemathesis' failure), or a request that hung
            failures.append(f"{operation.label}: {exc}")
    return failures


def test_no_5xx_with_generated_paths(server_process: ServerProcess, seeded: dict[str, Any]) -> None:
    operations = _operations(server_process)
    assert len(operations) > 50  # the whole API, not a part of it
    with health_probe(server_process.base_url):
        failures = _fuzz(operations, key_headers(seeded["key"]))
    assert not failures, "\n\n".join(failures)


def test_no_5xx_on_seeded_objects(server_process: ServerProcess, seeded: dict[str, Any]) -> None:
    bind = {
        "app": APP,
        "version": seeded["version"],
        "ns": "fuzz_ns",
        "name": "fuzz_src",
        "run_id": seeded["run_id"],
        "hint_id": seeded["hint_id"],
        "table": "fuzz_src.main.people",
        "block": "template",
    }
    # Deleting the seeded objects would leave the later operations nothing to find.
    operations = [op for op in _operations(server_process) if op.method.upper() != "DELETE"]
    with health_probe(server_process.base_url):
        failures = _fuzz(operations, key_headers(seeded["key"]), bind)
    assert not failures, "\n\n".join(failures)

"""Sub-flow nodes that call apps by reference, with the real app and run services on
SQLite and PostgreSQL: recursion across apps refused at save and at publish, pinned and
published versions run as nested spans of the calling run, recorded node by node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.registry import APPS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, FlowInvalidError
from dagwright.services.apps import AppService
from dagwright.services.invoke import InProcessInvoker
from dagwright.services.runs.service import RunService
from support import blocks as test_blocks
from support.database import DATABASES, clear, migrated_engine
from support.flows import edge, node


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


@pytest.fixture
def apps(engine: Engine) -> AppService:
    clear(engine)
    registry = Registry.from_modules([io_blocks, test_blocks, iteration_blocks])
    return AppService(engine, registry)


@pytest.fixture
async def runs(engine: Engine, apps: AppService) -> AsyncIterator[RunService]:
    services = BlockServices()
    service = RunService(engine, Executor(ExecutorOptions(services=services)), "r1")
    services.provide(APPS, InProcessInvoker(apps, service))
    service.start_writer()
    yield service
    service.stop_writer()


def flow(nodes: list, edges: list) -> dict[str, Any]:
    return {"format": "dagwright.flow", "version": 1, "name": "f", "nodes": nodes, "edges": edges}


def upper() -> dict[str, Any]:
    return flow(
        [
            node("text", "text_input", name="text"),
            node("up", "t_upper"),
            node("y", "output", name="y"),
        ],
        [edge("text", "up.text"), edge("up", "y")],
    )


def calling(ref: str) -> dict[str, Any]:
    return flow(
        [
            node("text", "text_input", name="text"),
            node("call", "subflow", app=ref, output="y"),
            node("y", "output", name="y"),
        ],
        [edge("text", "call.text"), edge("call", "y")],
    )


def test_recursion_across_apps_is_refused_at_save_and_at_publish(apps: AppService) -> None:
    apps.create_app("leaf", "Leaf")
    leaf = apps.create_version("leaf", upper())
    apps.publish("leaf", leaf.id)
    apps.create_app("aa", "A")
    apps.create_app("bb", "B")
    apps.publish("bb", apps.create_version("bb", calling("leaf@published")).id)
    apps.publish("aa", apps.create_version("aa", calling("bb@published")).id)

    # bb calling aa's published version, which calls bb: named when saving bb
    with pytest.raises(FlowInvalidError) as saving:
        apps.create_version("bb", calling("aa@published"))
    assert "app bb@published -> app aa@published -> app bb@published" in saving.value.message

    # Saved while aa pointed at leaf, published once aa points at bb: refused at publish.
    apps.publish("aa", apps.create_version("aa", calling("leaf@1")).id)
    looping = apps.create_version("bb", calling("aa@published"))
    apps.publish("aa", apps.create_version("aa", calling("bb@published")).id)
    with pytest.raises(FlowInvalidError) as publishing:
        apps.publish("bb", looping.id)
    assert "-> app bb@published" in publishing.value.message
    assert apps.get_app("bb").published_version_id != looping.id


async def test_app_reference_runs_as_a_nested_span_and_is_recorded(
    apps: AppService, runs: RunService
) -> None:
    apps.create_app("leaf", "Leaf")
    first = apps.create_version("leaf", upper())
    apps.publish("leaf", first.id)
    apps.create_app("caller", "Caller")
    version = apps.create_version("caller", calling("leaf@1"))
    plan = apps.compiled(version)
    live = await runs.start(plan, {"text": "hi"}, app_id=version.app_id, version_id=version.id)
    record = await live.wait()
    assert record.status == "succeeded", record.error
    assert record.outputs == {"y": "HI"}
    recorded = {n.node: n for n in record.nodes}
    assert {"call", "call/text", "call/up", "call/y"} <= set(recorded)
    assert recorded["call/up"].output == "HI"
    # Run in the same run, not as a child run of its own.
    assert [r.id for r in runs.list().items] == [record.id]


def test_a_diff_names_the_subflows_that_changed(apps: AppService) -> None:
    def with_subflows(**subflows: dict[str, Any]) -> dict[str, Any]:
        doc = upper()
        doc["subflows"] = subflows
        return doc

    inner = {"nodes": upper()["nodes"], "edges": upper()["edges"]}
    apps.create_app("grouped", "Grouped")
    first = apps.create_version("grouped", with_subflows(a=inner, b=inner))
    changed = {**inner, "description": "now described"}
    second = apps.create_version("grouped", with_subflows(b=changed, c=inner))
    diff = apps.diff("grouped", str(first.number), str(second.number))
    assert diff["subflows"] == {"added": ["c"], "removed": ["a"], "changed": ["b"]}

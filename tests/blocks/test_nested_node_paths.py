"""Node paths of nested runs longer than any node id (sub-flows three apps deep, 200
characters) are recorded and read back whole on SQLite and PostgreSQL (migration 0013)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.registry import APPS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.services.apps import AppService
from dagwright.services.invoke import InProcessInvoker
from dagwright.services.runs.service import RunService
from support import blocks as test_blocks
from support.database import DATABASES, clear, migrated_engine
from support.flows import edge, node

# Three sub-flow nodes and the innermost node: 50 + 1 + 50 + 1 + 50 + 1 + 47 = 200 characters.
OUTER, MIDDLE, INNER = ("o" * 50, "m" * 50, "i" * 50)
LEAF = "l" * 47
PATH = f"{OUTER}/{MIDDLE}/{INNER}/{LEAF}"


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


def flow(step: dict[str, Any]) -> dict[str, Any]:
    """text -> step -> y, where `step` takes `text` and returns the answer."""
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "f",
        "nodes": [node("text", "text_input", name="text"), step, node("y", "output", name="y")],
        "edges": [edge("text", f"{step['id']}.text"), edge(step["id"], "y")],
    }


def publish(apps: AppService, slug: str, document: dict[str, Any]) -> None:
    apps.create_app(slug, slug)
    apps.publish(slug, apps.create_version(slug, document).id)


def nest(apps: AppService, innermost: dict[str, Any]) -> str:
    """Apps calling each other three deep around `innermost`; returns the outermost app."""
    publish(apps, "inner", flow(innermost))
    publish(apps, "middle", flow(node(INNER, "subflow", app="inner@published", output="y")))
    publish(apps, "outer", flow(node(MIDDLE, "subflow", app="middle@published", output="y")))
    publish(apps, "caller", flow(node(OUTER, "subflow", app="outer@published", output="y")))
    return "caller"


async def run(apps: AppService, runs: RunService, slug: str) -> str:
    version = apps.get_version(slug, "published")
    plan = apps.compiled(version)
    live = await runs.start(plan, {"text": "hi"}, app_id=version.app_id, version_id=version.id)
    record = await live.wait()
    assert record.status == "succeeded", record.error
    assert record.outputs == {"y": "HI"}
    return record.id


async def test_a_200_character_node_path_is_recorded_and_read_back(
    apps: AppService, runs: RunService
) -> None:
    run_id = await run(apps, runs, nest(apps, node(LEAF, "t_upper")))
    assert len(PATH) == 200
    recorded = {n.node: n for n in runs.get(run_id).nodes}
    assert recorded[PATH].output == "HI"
    assert recorded[PATH].status == "succeeded"

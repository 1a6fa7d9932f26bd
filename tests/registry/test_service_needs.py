"""Declared block dependencies: a run that lacks a service its blocks declare (`needs=`)
fails at its start, before any node runs, naming every missing service and every node that
needs it; a config-dependent declaration asks only for what the config uses."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from dagwright.registry import (
    MODELS,
    SECRETS,
    TABLES,
    BlockServices,
    MissingServiceError,
    NodeContext,
    Registry,
    block,
    spec_of,
)
from dagwright.runtime import Executor, ExecutorOptions, compile_flow, parse_flow
from dagwright.secrets import MappingSecrets
from support.flows import edge, flow_doc, node

started: list[str] = []


@block("t_needs_models", category="llm", description="Needs model access.", needs=(MODELS,))
def t_needs_models(ctx: NodeContext, x: Any = None) -> str:
    """Would call a model."""
    started.append(ctx.node_id)
    return "model"


@block(
    "t_needs_models_and_tables",
    category="tool",
    description="Needs model access and tables.",
    needs=(MODELS, TABLES),
)
def t_needs_models_and_tables(ctx: NodeContext, x: Any = None) -> str:
    """Would query tables and call a model."""
    started.append(ctx.node_id)
    return "both"


class SecretConfig(BaseModel):
    secret: str | None = None


@block(
    "t_needs_secret_if_named",
    category="tool",
    description="Needs secrets only when it names one.",
    needs=lambda config: (SECRETS,) if config.secret else (),
)
def t_needs_secret_if_named(config: SecretConfig, ctx: NodeContext, x: Any = None) -> str:
    """Reads the named secret, if any."""
    started.append(ctx.node_id)
    return ctx.service(SECRETS).get(config.secret) if config.secret else "none"


def registry() -> Registry:
    return Registry.default().extended(
        spec
        for spec in (spec_of(value) for value in list(globals().values()))
        if spec is not None and spec.name.startswith("t_needs_")
    )


def plan_of(*nodes: dict[str, Any]) -> Any:
    ids = [n["id"] for n in nodes]
    flow = flow_doc([*nodes, node("out", "output", name="out")], [edge(ids[-1], "out")])
    return compile_flow(parse_flow(flow), registry())


async def test_a_run_lacking_services_fails_at_its_start_naming_every_service_and_node() -> None:
    started.clear()
    plan = plan_of(
        node("ask", "t_needs_models"),
        node("look", "t_needs_models_and_tables"),
        node("again", "t_needs_models"),
    )
    given = BlockServices({SECRETS: MappingSecrets({})})
    with pytest.raises(MissingServiceError) as missing:
        Executor(ExecutorOptions(services=given)).start(plan)
    assert missing.value.code == "service_unavailable"
    message = missing.value.message
    assert "model providers (the LLM gateway) (models) for nodes 'ask', 'look', 'again'" in message
    assert "the data sources' query engine (tables) for node 'look'" in message
    assert started == []  # nothing ran


async def test_a_service_provided_lazily_counts_and_is_built_only_when_asked() -> None:
    started.clear()
    built: list[str] = []

    def models() -> Any:
        built.append("models")
        return object()

    given = BlockServices()
    given.provide_lazily(MODELS, models)
    result = await Executor(ExecutorOptions(services=given)).run(
        plan_of(node("ask", "t_needs_models"))
    )
    assert result.status == "succeeded", result.error
    assert started == ["ask"]
    assert built == []  # the block did not look it up: declared is not built
    assert given.built() == []


async def test_a_need_that_depends_on_the_config_is_asked_only_when_the_config_uses_it() -> None:
    started.clear()
    plain = await Executor().run(plan_of(node("s", "t_needs_secret_if_named")))
    assert plain.status == "succeeded", plain.error
    assert plain.outputs == {"out": "none"}
    with pytest.raises(MissingServiceError, match=r"secrets \(secrets\) for node 's'"):
        await Executor().run(plan_of(node("s", "t_needs_secret_if_named", secret="token")))
    given = BlockServices({SECRETS: MappingSecrets({"token": "t0ken"})})
    named = await Executor(ExecutorOptions(services=given)).run(
        plan_of(node("s", "t_needs_secret_if_named", secret="token"))
    )
    assert named.outputs == {"out": "t0ken"}


def test_a_block_that_needs_services_must_take_a_node_context() -> None:
    from dagwright.errors import BlockDefinitionError

    with pytest.raises(BlockDefinitionError, match="takes a NodeContext"):

        @block("t_needs_blind", category="tool", description="No context.", needs=(MODELS,))
        def t_needs_blind(x: str) -> str:
            """Cannot look its service up."""
            return x


def test_the_builtin_blocks_declare_what_they_look_up() -> None:
    library = Registry.default()
    declared = {name: library.get(name).needs for name in ("chat", "sql_query", "template")}
    assert declared == {"chat": (MODELS,), "sql_query": (TABLES,), "template": ()}
    # schema_lookup's embedder comes from the tables service (the data layer), even a
    # provider's: the block needs no model access of its own.
    assert library.get("schema_lookup").needs == (TABLES,)

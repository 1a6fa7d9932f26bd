"""Compact flow building for tests: node("a", "t_add"), edge("a", "b.x", branch="true")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagwright.registry import Registry
from dagwright.runtime import CompiledFlow, Flow, compile_flow, parse_flow


def registry() -> Registry:
    import dagwright.blocks.input as io_blocks
    from support import blocks

    return Registry.from_modules([io_blocks, blocks])


def node(node_id: str, block: str, timeout: float | None = None, **config: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"id": node_id, "block": block, "config": config}
    if timeout is not None:
        data["timeout"] = timeout
    return data


def edge(source: str, target: str, branch: str | None = None) -> dict[str, Any]:
    """'a' or 'a.port' -> 'b.port'."""
    s_node, _, s_port = source.partition(".")
    t_node, _, t_port = target.partition(".")
    data: dict[str, Any] = {
        "source": {"node": s_node, "port": s_port or "output"},
        "target": {"node": t_node, "port": t_port or "value"},
    }
    if branch is not None:
        data["branch"] = branch
    return data


def flow_doc(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "test",
        "nodes": nodes,
        "edges": edges,
    }


def make_flow(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Flow:
    return parse_flow(flow_doc(nodes, edges))


def compiled(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], reg: Registry | None = None
) -> CompiledFlow:
    return compile_flow(make_flow(nodes, edges), reg or registry())


TupleEdge = tuple[str, str] | tuple[str, str, str]


def flow_from_tuples(
    nodes: list[tuple[str, str, dict[str, Any]]], edges: Sequence[TupleEdge]
) -> Flow:
    """Nodes as (id, block, config); edges as ("node.port", "node.port"[, branch])."""
    return make_flow(
        [{"id": i, "block": b, "config": c} for i, b, c in nodes],
        [edge(*spec) for spec in edges],
    )

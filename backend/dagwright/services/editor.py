"""What the flow editor asks of the block registry and the runtime, answered by the server's
own rules: a flow checked or compiled without being saved, the port types and which may be
connected, the ports one block configuration gives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from dagwright.errors import DagwrightError, describe_validation_error
from dagwright.registry import Registry
from dagwright.registry.types import compatibility, type_name
from dagwright.runtime import AppResolver, CompiledFlow, analyse, compile_flow, parse_flow


def check_flow(document: Any, registry: Registry, apps: AppResolver) -> dict[str, Any]:
    """Every problem of an unsaved flow, each naming its node and port: {ok, problems}."""
    analysis = analyse(parse_flow(document), registry, apps)
    return {"ok": analysis.ok, "problems": [p.to_dict() for p in analysis.problems]}


def compile_unsaved(document: Any, registry: Registry, apps: AppResolver) -> CompiledFlow:
    """A flow as it is on the canvas, compiled to run (FlowInvalidError lists its problems)."""
    return compile_flow(parse_flow(document), registry, apps)


def port_types(registry: Registry) -> dict[str, Any]:
    """Every port type of the registry and, for each pair, whether an edge is allowed:
    `yes`, `check` (allowed, checked at run time) or `no` (refused at save time)."""
    types: dict[str, Any] = {}
    for spec in registry:
        for port in (*spec.inputs.values(), *spec.outputs.values()):
            types.setdefault(type_name(port.type), port.type)
        if spec.dynamic_ports is not None:
            types.setdefault(type_name(spec.dynamic_port_type), spec.dynamic_port_type)
    names = sorted(types)
    return {
        "types": names,
        "compatibility": {
            source: {target: compatibility(types[source], types[target]).value for target in names}
            for source in names
        },
    }


def block_ports(registry: Registry, block: str, config: dict[str, Any]) -> dict[str, Any]:
    """The input ports and branches one configuration gives a block."""
    spec = registry.get(block)
    parsed = spec.config_model.model_validate(config)
    return {
        "inputs": [p.to_schema() for p in spec.input_ports(parsed).values()],
        "outputs": [p.to_schema() for p in spec.outputs.values()],
        "branches": spec.branch_names(parsed),
    }


def nodes_ports(
    registry: Registry, nodes: Mapping[str, tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """The ports of several nodes at once (node id -> block and config), as `block_ports`
    answers each: what the editor draws when a flow opens. A node whose block or config is
    refused gets the refusal it would get alone (`errors`: its code and message), so one bad
    node does not hide the others' ports."""
    ports: dict[str, Any] = {}
    errors: dict[str, dict[str, str]] = {}
    for node_id, (block, config) in nodes.items():
        try:
            ports[node_id] = block_ports(registry, block, config)
        except DagwrightError as exc:
            errors[node_id] = {"code": exc.code, "message": exc.message}
        except ValidationError as exc:
            errors[node_id] = {"code": "invalid_config", "message": describe_validation_error(exc)}
    return {"ports": ports, "errors": errors}

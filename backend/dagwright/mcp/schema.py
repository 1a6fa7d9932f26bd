"""An app's tool description: its input ports as the tool's JSON Schema."""

from __future__ import annotations

from typing import Any

from dagwright.registry.types import json_schema
from dagwright.runtime.plan import CompiledFlow


def input_schema(plan: CompiledFlow) -> dict[str, Any]:
    """`{"type": "object", ...}` with a property per flow input, typed like its port."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, flow_input in plan.inputs.items():
        prop = dict(json_schema(flow_input.type))
        if flow_input.description:
            prop["description"] = flow_input.description
        if flow_input.required:
            required.append(name)
        elif flow_input.default is not None:
            prop["default"] = flow_input.default
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema

"""Blocks made at run time from a description rather than a Python function: their ports and
types come from data (Data-Copilot's interfaces: dagwright.methods.data_copilot.tool_blocks).
The spec goes through the same `block` analysis as a written block, so the validator, the
executor and the palette cannot tell the difference."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dagwright.registry.block import BlockSpec, Category, block, spec_of
from dagwright.registry.context import NodeContext
from dagwright.registry.services import Service

_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True, slots=True)
class DynamicPort:
    name: str
    type: Any  # a port annotation: str, int, list[dict[str, Any]]...
    default: Any = _NO_DEFAULT  # given: the port is optional


Run = Callable[[NodeContext, dict[str, Any]], Awaitable[Any]]


def dynamic_block(
    name: str,
    *,
    category: Category,
    description: str,
    doc: str,
    inputs: Sequence[DynamicPort],
    output: Any,
    run: Run,
    module: str,
    tags: Sequence[str] = (),
    needs: Sequence[Service[Any]] = (),
) -> BlockSpec:
    """A block named `name` whose input ports are `inputs` and whose output is typed
    `output`; running it awaits `run(ctx, ports)`."""

    async def call(ctx: NodeContext, **ports: Any) -> Any:
        return await run(ctx, ports)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=NodeContext)]
    parameters += [
        inspect.Parameter(
            p.name, inspect.Parameter.KEYWORD_ONLY, annotation=p.type, default=p.default
        )
        for p in inputs
    ]
    call.__signature__ = inspect.Signature(parameters, return_annotation=output)  # type: ignore[attr-defined]
    call.__annotations__ = {
        "ctx": NodeContext,
        **{p.name: p.type for p in inputs},
        "return": output,
    }
    call.__doc__ = doc
    call.__name__ = call.__qualname__ = name
    call.__module__ = module
    decorated = block(name, category=category, description=description, tags=tags, needs=needs)(
        call
    )
    spec = spec_of(decorated)
    assert spec is not None  # `block` attaches it
    return spec

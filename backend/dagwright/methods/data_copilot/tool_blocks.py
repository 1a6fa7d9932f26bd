"""A library's interfaces as tool blocks (registry/dynamic.py): `dc_<source>_<name>`, one
input port per interface input (typed; a `table` input takes records), a table output as
records, the signature and version in the block's text. The server adds them to its palette
at start-up, so a designed interface can be dropped into any flow like a written block."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from dagwright.methods.data_copilot.interface import InputType, Interface, call, table_records
from dagwright.methods.data_copilot.library import InterfaceLibrary
from dagwright.registry import SANDBOX, TABLES, BlockSpec, NodeContext
from dagwright.registry.dynamic import DynamicPort, dynamic_block

PORT_TYPES: dict[InputType, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "date": str,  # ISO text, checked when called
    "list": list[Any],
    "table": list[dict[str, Any]],
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def block_name(source: str, interface: str) -> str:
    return f"dc_{_UNSAFE.sub('_', source)}_{interface}"[:64]


def interface_block(source: str, interface: Interface, version: int) -> BlockSpec:
    async def run(ctx: NodeContext, ports: dict[str, Any]) -> list[dict[str, Any]]:
        engine = ctx.service(TABLES).engine()
        table = await asyncio.to_thread(call, interface, ports, engine, ctx.service(SANDBOX))
        return table_records(table)

    summary = " ".join(interface.description.split()) or interface.name
    return dynamic_block(
        block_name(source, interface.name),
        category="tool",
        description=f"{source}: {summary}"[:200],
        doc=(
            f"{interface.signature()}\n\n{interface.description}\n\n"
            f"Data-Copilot interface of data source {source!r}, version {version}; it reads "
            f"{', '.join(interface.tables) or 'no table'} and runs in the Python sandbox."
        ),
        inputs=[
            DynamicPort(i.name, PORT_TYPES[i.type])
            if i.default is None
            else DynamicPort(i.name, PORT_TYPES[i.type], i.default)
            for i in interface.inputs
        ],
        output=list[dict[str, Any]],
        run=run,
        module=__name__,
        tags=("data_copilot", f"source:{source}", f"version:{version}"),
        needs=(TABLES, SANDBOX),
    )


def library_blocks(library: InterfaceLibrary) -> list[BlockSpec]:
    """Every interface in use, of every source, as a block."""
    return [
        interface_block(source, Interface.model_validate(row["interface"]), row["version"])
        for source in library.sources()
        for row in library.listing(source)
    ]

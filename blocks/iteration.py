"""Sub-flow blocks: call a sub-flow once, map it over a list, repeat it until it says stop.

The sub-flow is one stored in the same flow document (`subflow`) or an app by reference
(`app`: 'slug@3', 'slug@published'). Its input and output nodes are the node's ports, so
edges into and out of these nodes are type-checked at save time like any other. Every run
of the sub-flow is a nested span of this node in the run's trace (runtime/subflow.py).
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from pydantic import Field

from dagwright.registry import Compat, NodeContext, PortSpec, block, compatibility, type_name
from dagwright.runtime.iteration import MapSpec, RepeatSpec, StopReason, call_once, map_items
from dagwright.runtime.iteration import repeat as repeat_rounds
from dagwright.runtime.subflow import SUBFLOW_TAG, SUBFLOWS, Interface, SubflowConfig

# Names the block functions take themselves: a sub-flow input of one of these names would
# collide with them.
_RESERVED = frozenset({"config", "ctx", "items"})


def _no_ports(_config: Any) -> list[str]:
    # The ports come from the sub-flow's interface, which validation resolves.
    return []


def _check_input(interface: Interface, name: str, what: str) -> None:
    if name not in interface.inputs:
        known = ", ".join(interface.inputs) or "none"
        raise ValueError(f"{what}: the sub-flow has no input {name!r} (inputs: {known})")


def _check_output(interface: Interface, name: str, what: str) -> None:
    if name not in interface.outputs:
        known = ", ".join(interface.outputs) or "none"
        raise ValueError(f"{what}: the sub-flow has no output {name!r} (outputs: {known})")


def _passed_on(interface: Interface, taken: set[str]) -> dict[str, PortSpec]:
    """The sub-flow inputs the node takes as its own ports (all but those it fills in)."""
    ports = {name: port for name, port in interface.inputs.items() if name not in taken}
    clash = sorted(_RESERVED & set(ports))
    if clash:
        raise ValueError(f"sub-flow input name(s) {', '.join(clash)} are reserved: rename them")
    return ports


class CallConfig(SubflowConfig):
    output: str | None = Field(
        None, description="Return only this output of the sub-flow; empty: all, as a dict."
    )

    def ports(self, interface: Interface) -> tuple[dict[str, PortSpec], dict[str, Any]]:
        if self.output is None:
            return _passed_on(interface, set()), {"output": dict[str, Any]}
        _check_output(interface, self.output, "output")
        return _passed_on(interface, set()), {"output": interface.outputs[self.output]}


@block(
    "subflow",
    category="invoke",
    description="Run a sub-flow (of this flow, or an app by version) once, as one step.",
    example="subflow 'clean' with input text -> {'text': ...}",
    dynamic_ports=_no_ports,
    tags=(SUBFLOW_TAG,),
)
async def subflow(config: CallConfig, ctx: NodeContext, **inputs: Any) -> Any:
    """Runs the sub-flow with this node's inputs (the sub-flow's input nodes are its ports)
    and returns its outputs as a dict, or the one named in `output`. Its nodes show in the
    trace under this node (`node/inner`)."""
    host = ctx.service(SUBFLOWS)
    return await call_once(host, ctx.node_id, config.ref(), inputs, config.output)


class MapConfig(SubflowConfig):
    item: str = Field("item", description="The sub-flow input that receives each item.")
    index: str | None = Field(
        None, description="A sub-flow input that receives the item's position (0, 1, ...)."
    )
    output: str | None = Field(
        None, description="Keep only this output per item; empty: all outputs, as a dict."
    )
    concurrency: int = Field(8, ge=1, le=1000, description="Items running at once.")
    on_item_error: Literal["fail", "skip", "default"] = Field(
        "fail",
        description="When an item fails: fail the node, leave the item out, or use `default`.",
    )
    default: Any = Field(None, description="The result of a failed item (on_item_error).")

    def ports(self, interface: Interface) -> tuple[dict[str, PortSpec], dict[str, Any]]:
        _check_input(interface, self.item, "item")
        taken = {self.item}
        if self.index is not None:
            _check_input(interface, self.index, "index")
            taken.add(self.index)
        ports = _passed_on(interface, taken)
        item_type: Any = interface.inputs[self.item].type
        ports["items"] = PortSpec("items", list[item_type], description="the list to map over")
        if self.output is None:
            result_type: Any = dict[str, Any]
        else:
            _check_output(interface, self.output, "output")
            result_type = interface.outputs[self.output]
        return ports, {"output": list[result_type]}


class MapResult(TypedDict):
    output: list[Any]  # per item, in input order
    failed: list[dict[str, Any]]  # {index, code, error} of items that failed


@block(
    "map",
    category="invoke",
    description="Run a sub-flow once per item of a list, concurrently; results in input order.",
    example="items ['q1', 'q2'], sub-flow 'classify' -> ['sql', 'lookup']",
    dynamic_ports=_no_ports,
    tags=(SUBFLOW_TAG,),
)
async def map_list(
    config: MapConfig, ctx: NodeContext, items: list[Any], **inputs: Any
) -> MapResult:
    """Runs the sub-flow for every item (given to its input `item`; the node's other ports
    go to every run), `concurrency` at a time, and returns the results in the order of the
    items. A failing item fails the node, is left out, or gets `default` (on_item_error);
    `failed` lists the failures. Each item is an iteration in the trace (`node[3]/inner`)."""
    spec = MapSpec(
        config.item,
        config.index,
        config.output,
        config.concurrency,
        config.on_item_error,
        config.default,
    )
    host = ctx.service(SUBFLOWS)
    results, failed = await map_items(host, ctx.node_id, config.ref(), items, inputs, spec)
    return {"output": results, "failed": failed}


class RepeatConfig(SubflowConfig):
    state: str = Field(
        "state",
        description="The sub-flow input that takes the state, and the output that gives the "
        "next round's state (same name).",
    )
    until: str = Field("done", description="A boolean output of the sub-flow: true stops.")
    round: str | None = Field(
        None, description="A sub-flow input that receives the round number (0, 1, ...)."
    )
    max_rounds: int = Field(5, ge=1, le=1000, description="Rounds at most.")
    on_max_rounds: Literal["return", "fail"] = Field(
        "return", description="After max_rounds without stop: return the last state, or fail."
    )

    def ports(self, interface: Interface) -> tuple[dict[str, PortSpec], dict[str, Any]]:
        _check_input(interface, self.state, "state")
        _check_output(interface, self.state, "state")
        _check_output(interface, self.until, "until")
        until_type = interface.outputs[self.until]
        if compatibility(until_type, bool) is Compat.NO:
            raise ValueError(
                f"until: output {self.until!r} gives {type_name(until_type)}, not bool"
            )
        state_in = interface.inputs[self.state].type
        state_out = interface.outputs[self.state]
        if compatibility(state_out, state_in) is Compat.NO:
            raise ValueError(
                f"state: output {self.state!r} gives {type_name(state_out)}, which input "
                f"{self.state!r} ({type_name(state_in)}) cannot take in the next round"
            )
        taken = {self.round} if self.round is not None else set()
        if self.round is not None:
            _check_input(interface, self.round, "round")
        return _passed_on(interface, taken), {"output": state_out}


class RepeatResult(TypedDict):
    output: Any  # the last state
    rounds: int
    stopped: StopReason  # "until": the sub-flow said stop; "max_rounds": the limit did
    outputs: dict[str, Any]  # every output of the last round


@block(
    "repeat",
    category="invoke",
    description="Run a sub-flow in rounds, each on the state the last returned, until it stops.",
    example="state 'draft', sub-flow 'revise' (done when the check passes) -> final answer",
    dynamic_ports=_no_ports,
    tags=(SUBFLOW_TAG,),
)
async def repeat(config: RepeatConfig, ctx: NodeContext, **inputs: Any) -> RepeatResult:
    """Runs the sub-flow with the state (the port named by `state`, then what each round
    returns on its output of that name) and the node's other ports, until its `until`
    output is true or `max_rounds` rounds have run; `stopped` says which. Each round is an
    iteration in the trace (`node[2]/inner`)."""
    state = inputs.pop(config.state)
    spec = RepeatSpec(
        config.state, config.until, config.round, config.max_rounds, config.on_max_rounds
    )
    host = ctx.service(SUBFLOWS)
    outcome = await repeat_rounds(host, ctx.node_id, config.ref(), state, inputs, spec)
    return {
        "output": outcome.state,
        "rounds": outcome.rounds,
        "stopped": outcome.stopped,
        "outputs": outcome.outputs,
    }

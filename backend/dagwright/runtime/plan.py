"""Compiling a validated flow into an execution plan: integer-indexed nodes and edges with
their run-time checks decided once, so a run does no lookups by name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dagwright.registry import BlockSpec, Compat, Registry, Service, checker_for, compatibility
from dagwright.registry.types import Checker
from dagwright.runtime.flow import ERROR_PORT, Edge, ErrorPolicy, Flow
from dagwright.runtime.subflow import AppResolver, SubflowConfig
from dagwright.runtime.validate import Analysis, FlowInvalidError, Problem, analyse


@dataclass(slots=True)
class PlanEdge:
    target: int  # index of the target node
    slot: int  # index of the target port among the target's wired ports
    source_port: str
    branch: str | None
    check: Checker | None  # set when the source type only may fit (e.g. Any -> str)
    label: str  # "a.output -> b.text", for messages


@dataclass(slots=True)
class PlanNode:
    index: int
    id: str
    spec: BlockSpec
    config: BaseModel
    timeout: float | None
    port_names: tuple[str, ...]  # the wired input ports, in slot order
    port_edge_counts: tuple[int, ...]
    static_kwargs: dict[str, Any]  # config and defaults of unwired optional ports
    output_checks: dict[str, Checker]
    out_edges: list[PlanEdge] = field(default_factory=list)
    interface_name: str | None = None  # the flow input/output name of an input/output node
    on_error: ErrorPolicy | None = None
    # Edges from the `error` port of a node whose policy routes failures on: they carry the
    # error record when it fails and SKIPPED when it succeeds.
    error_edges: list[PlanEdge] = field(default_factory=list)
    # A node that runs sub-flows: it only waits for its children, so it takes no slot of the
    # executor-wide limit (its children's nodes do; holding one too could deadlock).
    orchestrates: bool = False


@dataclass(slots=True)
class FlowInput:
    name: str
    node: str
    type: Any
    description: str
    required: bool
    default: Any


@dataclass(slots=True)
class CompiledFlow:
    """A flow checked against the registry and ready to run any number of times."""

    flow: Flow
    nodes: list[PlanNode]
    inputs: dict[str, FlowInput]
    outputs: dict[str, str]  # output name -> node id
    warnings: list[Problem]
    # The document's sub-flows that its nodes run, compiled once; shared by nested sub-flows.
    subflows: dict[str, CompiledFlow] = field(default_factory=dict)
    # Whether a node runs sub-flows: decided once, since every run (each iteration too) asks.
    calls_subflows: bool = field(init=False)
    # The services each node needs, worked out on the first run (sub-flows are added after
    # the flow is built): every run checks them before it starts.
    _needs: tuple[tuple[str, Sequence[Service[Any]]], ...] | None = field(
        default=None, init=False, repr=False
    )
    # Node id -> node: resuming a big paused map looks nodes up once per reused result.
    _by_id: dict[str, PlanNode] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.calls_subflows = any(node.orchestrates for node in self.nodes)
        self._by_id = {node.id: node for node in self.nodes}

    def needs(self) -> tuple[tuple[str, Sequence[Service[Any]]], ...]:
        """(node id, the services it declares it needs) for every node a run may execute."""
        if self._needs is None:
            self._needs = tuple(
                (node.id, node.spec.needs_for(node.config)) for node in self.every_node()
            )
        return self._needs

    def every_node(self) -> Iterator[PlanNode]:
        """The nodes of this flow and of every sub-flow of its document (not of the apps it
        calls): what a run may execute, to see which services it needs."""
        yield from self.nodes
        for sub in self.subflows.values():
            yield from sub.nodes

    @property
    def name(self) -> str:
        return self.flow.name

    def blocks(self) -> dict[str, str]:
        """Node id -> block name, in the flow's order."""
        return {node.id: node.spec.name for node in self.nodes}

    def node(self, node_id: str) -> PlanNode:
        """The node with this id; KeyError names it when there is none."""
        found = self._by_id.get(node_id)
        if found is None:
            raise KeyError(f"the flow has no node {node_id!r}")
        return found

    def downstream(self, node_id: str) -> set[str]:
        """The node and every node reachable from it."""
        seen = {self.node(node_id).index}
        work = [self.node(node_id)]
        while work:
            for edge in work.pop().out_edges:
                if edge.target not in seen:
                    seen.add(edge.target)
                    work.append(self.nodes[edge.target])
        return {self.nodes[index].id for index in seen}


def _node_timeout(spec: BlockSpec, node_timeout: float | None) -> float | None:
    return node_timeout if node_timeout is not None else spec.timeout


def compile_flow(flow: Flow, registry: Registry, apps: AppResolver | None = None) -> CompiledFlow:
    """Validate and compile; raises FlowInvalidError listing every error. `apps` resolves
    app references for their save-time checks; without it a flow that calls apps is
    refused (a file run has no apps)."""
    analysis = analyse(flow, registry, apps)
    if not analysis.ok:
        raise FlowInvalidError(analysis.problems)
    subflows: dict[str, CompiledFlow] = {}
    compiled = _compile(analysis, subflows)
    # Every sub-flow the document's nodes reach, compiled once and shared by all of them.
    for name, sub in analysis.subflows.items():
        subflows[name] = _compile(sub, subflows)
    return compiled


def _compile(analysis: Analysis, subflows: dict[str, CompiledFlow]) -> CompiledFlow:
    flow = analysis.flow
    index = {node_id: i for i, node_id in enumerate(analysis.nodes)}
    wired: dict[str, dict[str, list[Edge]]] = defaultdict(lambda: defaultdict(list))
    for edge in analysis.edges:
        wired[edge.target.node][edge.target.port].append(edge)

    nodes: list[PlanNode] = []
    inputs: dict[str, FlowInput] = {}
    outputs: dict[str, str] = {}
    for node_id, info in analysis.nodes.items():
        assert info.config is not None  # analysis.ok guarantees every config parsed
        spec, config = info.spec, info.config
        ports = wired[node_id]
        static: dict[str, Any] = {}
        if spec.config_param:
            static[spec.config_param] = config
        for port in info.inputs.values():
            if port.name not in ports and not port.required:
                static[port.name] = port.default
        interface_name = None
        if spec.role != "step":
            interface_name = str(getattr(config, "name", node_id))
        if spec.role == "flow_input":
            default = getattr(config, "default", None)
            inputs[interface_name or node_id] = FlowInput(
                name=interface_name or node_id,
                node=node_id,
                type=spec.outputs["output"].type,
                description=str(getattr(config, "description", "")),
                required=bool(getattr(config, "required", True)) and default is None,
                default=default,
            )
        elif spec.role == "flow_output":
            outputs[interface_name or node_id] = node_id
        checks = {
            name: check
            for name, port in spec.outputs.items()
            if (check := checker_for(port.type)) is not None
        }
        nodes.append(
            PlanNode(
                index=index[node_id],
                id=node_id,
                spec=spec,
                config=config,
                timeout=_node_timeout(spec, info.node.timeout),
                port_names=tuple(ports),
                port_edge_counts=tuple(len(edges) for edges in ports.values()),
                static_kwargs=static,
                output_checks=checks,
                interface_name=interface_name,
                on_error=info.node.on_error,
                orchestrates=isinstance(config, SubflowConfig),
            )
        )
    for node in nodes:
        info = analysis.nodes[node.id]
        for slot, (port_name, edges) in enumerate(wired[node.id].items()):
            target_type = info.inputs[port_name].type
            for edge in edges:
                source = analysis.nodes[edge.source.node]
                source_type = source.outputs[edge.source.port].type
                needs_check = compatibility(source_type, target_type) is Compat.CHECK
                source_node = nodes[index[edge.source.node]]
                is_error = edge.source.port == ERROR_PORT and ERROR_PORT not in source.spec.outputs
                (source_node.error_edges if is_error else source_node.out_edges).append(
                    PlanEdge(
                        target=node.index,
                        slot=slot,
                        source_port=edge.source.port,
                        branch=edge.branch,
                        check=checker_for(target_type) if needs_check else None,
                        label=str(edge),
                    )
                )
    warnings = [p for p in analysis.problems if p.severity == "warning"]
    return CompiledFlow(flow, nodes, inputs, outputs, warnings, subflows)

"""Validation of a flow against the registry: every problem at once, each naming its node and
port. Runs when a flow is saved and before every run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, ValidationError

from dagwright.errors import DagwrightError
from dagwright.registry import BlockSpec, Compat, PortSpec, Registry, compatibility, type_name
from dagwright.runtime.flow import Edge, Flow, Node

Severity = Literal["error", "warning"]

# The codes a problem may carry; the editor keys its messages and highlights on them.
PROBLEM_CODES = (
    "duplicate_node",
    "unknown_block",
    "invalid_config",
    "unknown_node",
    "unknown_port",
    "type_mismatch",
    "missing_branch",
    "unknown_branch",
    "unexpected_branch",
    "duplicate_edge",
    "missing_required_input",
    "cycle",
    "duplicate_name",
    "no_output",
    "unreachable_output",
    "unused_node",
)


@dataclass(slots=True, frozen=True)
class Problem:
    code: str
    message: str
    node: str | None = None
    port: str | None = None
    severity: Severity = "error"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = self.node or "flow"
        if self.port:
            where += f".{self.port}"
        return f"{self.severity}: {where}: [{self.code}] {self.message}"


class FlowInvalidError(DagwrightError):
    """A flow has errors; `problems` lists every one of them."""

    code = "flow_invalid"

    def __init__(self, problems: list[Problem]) -> None:
        errors = [p for p in problems if p.severity == "error"]
        lines = "\n".join(f"  {p}" for p in errors)
        super().__init__(f"the flow has {len(errors)} error(s):\n{lines}")
        self.problems = problems

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "problems": [p.to_dict() for p in self.problems]}


@dataclass(slots=True)
class NodeInfo:
    """A node with its block resolved and its configuration parsed."""

    node: Node
    spec: BlockSpec
    config: BaseModel | None  # None when the configuration is invalid
    inputs: dict[str, PortSpec]
    outputs: dict[str, PortSpec]
    branches: list[str]


@dataclass(slots=True)
class Analysis:
    flow: Flow
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)  # edges whose ends all resolve
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def add(
        self,
        code: str,
        message: str,
        node: str | None = None,
        port: str | None = None,
        severity: Severity = "error",
    ) -> None:
        self.problems.append(Problem(code, message, node, port, severity))


def _pydantic_problems(analysis: Analysis, node_id: str, error: ValidationError) -> None:
    for detail in error.errors():
        field_path = ".".join(str(part) for part in detail["loc"]) or "(config)"
        analysis.add(
            "invalid_config", f"config field {field_path!r}: {detail['msg']}", node=node_id
        )


def _resolve_nodes(analysis: Analysis, registry: Registry) -> None:
    for node in analysis.flow.nodes:
        if node.id in analysis.nodes:
            analysis.add("duplicate_node", f"node id {node.id!r} is used twice", node=node.id)
            continue
        spec = registry.find(node.block)
        if spec is None:
            analysis.add("unknown_block", f"unknown block {node.block!r}", node=node.id)
            continue
        config: BaseModel | None = None
        inputs: dict[str, PortSpec] = dict(spec.inputs)
        branches: list[str] = []
        try:
            config = spec.config_model.model_validate(node.config)
        except ValidationError as exc:
            _pydantic_problems(analysis, node.id, exc)
        else:
            try:
                inputs = spec.input_ports(config)
                branches = spec.branch_names(config)
            except DagwrightError as exc:  # e.g. a port name the block reserves
                analysis.add("invalid_config", exc.message, node=node.id)
                config = None
            except Exception as exc:  # a block's port or branch function that breaks
                analysis.add(
                    "invalid_config",
                    f"block {spec.name!r} cannot derive its ports or branches from "
                    f"this config: {type(exc).__name__}: {exc}",
                    node=node.id,
                )
                config = None
        analysis.nodes[node.id] = NodeInfo(node, spec, config, inputs, dict(spec.outputs), branches)


def _check_edge(analysis: Analysis, edge: Edge, seen: set[tuple[str, str, str]]) -> None:
    source = analysis.nodes.get(edge.source.node)
    target = analysis.nodes.get(edge.target.node)
    ok = True
    for ref, info in ((edge.source, source), (edge.target, target)):
        if info is None and not any(n.id == ref.node for n in analysis.flow.nodes):
            analysis.add(
                "unknown_node",
                f"edge {edge} names unknown node {ref.node!r}",
                node=ref.node,
                port=ref.port,
            )
        if info is None:
            ok = False
    if source is None or target is None:
        return
    out_port = source.outputs.get(edge.source.port)
    if out_port is None:
        ok = False
        known = ", ".join(source.outputs) or "none"
        analysis.add(
            "unknown_port",
            f"block {source.spec.name!r} has no output {edge.source.port!r} (outputs: {known})",
            node=edge.source.node,
            port=edge.source.port,
        )
    in_port = target.inputs.get(edge.target.port)
    if in_port is None and target.config is not None:
        ok = False
        known = ", ".join(target.inputs) or "none"
        analysis.add(
            "unknown_port",
            f"block {target.spec.name!r} has no input {edge.target.port!r} (inputs: {known})",
            node=edge.target.node,
            port=edge.target.port,
        )
    if source.spec.is_condition:
        if edge.branch is None:
            ok = False
            analysis.add(
                "missing_branch",
                f"edge {edge} leaves a condition: it needs a branch label "
                f"(one of: {', '.join(source.branches)})",
                node=edge.source.node,
                port=edge.source.port,
            )
        elif source.config is not None and edge.branch not in source.branches:
            ok = False
            analysis.add(
                "unknown_branch",
                f"edge {edge}: {source.spec.name!r} has no branch {edge.branch!r} "
                f"(branches: {', '.join(source.branches)})",
                node=edge.source.node,
                port=edge.source.port,
            )
    elif edge.branch is not None:
        ok = False
        analysis.add(
            "unexpected_branch",
            f"edge {edge} has a branch label but {source.spec.name!r} is not a condition",
            node=edge.source.node,
            port=edge.source.port,
        )
    key = (str(edge.source), str(edge.target), edge.branch or "")
    if key in seen:
        analysis.add(
            "duplicate_edge",
            f"edge {edge} appears twice",
            node=edge.target.node,
            port=edge.target.port,
        )
        return
    seen.add(key)
    if (
        out_port is not None
        and in_port is not None
        and compatibility(out_port.type, in_port.type) is Compat.NO
    ):
        ok = False
        analysis.add(
            "type_mismatch",
            f"{edge.source} gives {type_name(out_port.type)} but "
            f"{edge.target} takes {type_name(in_port.type)}",
            node=edge.target.node,
            port=edge.target.port,
        )
    if ok:
        analysis.edges.append(edge)


def _check_required_inputs(analysis: Analysis) -> None:
    wired: dict[str, set[str]] = defaultdict(set)
    for edge in analysis.flow.edges:
        wired[edge.target.node].add(edge.target.port)
    for node_id, info in analysis.nodes.items():
        if info.config is None:
            continue
        for port in info.inputs.values():
            if port.required and port.name not in wired[node_id]:
                analysis.add(
                    "missing_required_input",
                    f"required input {port.name!r} ({type_name(port.type)}) has no incoming edge",
                    node=node_id,
                    port=port.name,
                )


def _graph(analysis: Analysis) -> nx.DiGraph[str]:
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(analysis.nodes)
    for edge in analysis.flow.edges:
        if edge.source.node in analysis.nodes and edge.target.node in analysis.nodes:
            graph.add_edge(edge.source.node, edge.target.node)
    return graph


def _check_cycles(analysis: Analysis, graph: nx.DiGraph[str]) -> bool:
    found = False
    for component in nx.strongly_connected_components(graph):
        first = min(component)
        if len(component) == 1 and not graph.has_edge(first, first):
            continue
        found = True
        cycle = nx.find_cycle(graph.subgraph(component), source=first)
        path = " -> ".join([str(u) for u, _ in cycle] + [str(cycle[0][0])])
        analysis.add("cycle", f"cycle: {path} (loops belong in a sub-flow block)", node=first)
    return found


def _check_interface(analysis: Analysis, graph: nx.DiGraph[str], has_cycle: bool) -> None:
    names: dict[tuple[str, str], str] = {}
    inputs: list[str] = []
    outputs: list[str] = []
    for node_id, info in analysis.nodes.items():
        if info.spec.role == "step" or info.config is None:
            continue
        (inputs if info.spec.role == "flow_input" else outputs).append(node_id)
        name = str(getattr(info.config, "name", node_id))
        key = (info.spec.role, name)
        if key in names:
            kind = "input" if info.spec.role == "flow_input" else "output"
            analysis.add(
                "duplicate_name",
                f"flow {kind} name {name!r} is used by {names[key]!r} and {node_id!r}",
                node=node_id,
            )
        names[key] = node_id
    if not any(info.spec.role == "flow_output" for info in analysis.nodes.values()):
        analysis.add("no_output", "the flow has no output block, so a run returns nothing")
    if has_cycle:
        return
    fed = set(inputs)
    for node_id in inputs:
        fed |= nx.descendants(graph, node_id)
    if inputs:
        for node_id in outputs:
            if node_id not in fed:
                analysis.add(
                    "unreachable_output",
                    f"output {node_id!r} depends on none of the flow's inputs "
                    f"({', '.join(inputs)})",
                    node=node_id,
                )
    useful = set(outputs)
    for node_id in outputs:
        useful |= nx.ancestors(graph, node_id)
    for node_id in analysis.nodes:
        if node_id not in useful:
            analysis.add(
                "unused_node", f"node {node_id!r} feeds no output", node=node_id, severity="warning"
            )


def analyse(flow: Flow, registry: Registry) -> Analysis:
    """Check a flow completely; `analysis.problems` holds everything found."""
    analysis = Analysis(flow)
    _resolve_nodes(analysis, registry)
    seen: set[tuple[str, str, str]] = set()
    for edge in flow.edges:
        _check_edge(analysis, edge, seen)
    _check_required_inputs(analysis)
    graph = _graph(analysis)
    has_cycle = _check_cycles(analysis, graph)
    _check_interface(analysis, graph, has_cycle)
    return analysis


def validate(flow: Flow, registry: Registry) -> list[Problem]:
    return analyse(flow, registry).problems

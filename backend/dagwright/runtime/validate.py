"""Validation of a flow against the registry: every problem at once, each naming its node and
port. Runs when a flow is saved and before every run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from dagwright.errors import DagwrightError
from dagwright.registry import BlockSpec, Compat, PortSpec, Registry, compatibility, type_name
from dagwright.runtime.flow import ERROR_PORT, Edge, Flow, Node
from dagwright.runtime.subflow import AppResolver, Interface, SubflowConfig, SubflowRef

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
    "unknown_subflow",
    "subflow_recursion",
    "subflow_unavailable",
    "unknown_app",
    "subflow_invalid",
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
    # The document's sub-flows, analysed once each and shared by every analysis of the
    # document (the root's and its sub-flows').
    subflows: dict[str, Analysis] = field(default_factory=dict)
    document: str = ""  # "" for the flow being checked, "app slug@3: " for an app it calls

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


def _check_edge(analysis: Analysis, edge: Edge, seen: set[tuple[str, str, str]]) -> None:  # noqa: C901, PLR0912
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
    if source.spec.is_condition and not _is_error_port(source, edge.source.port):
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


@dataclass(slots=True)
class _Graph:
    """Which nodes each node feeds (and is fed by). Plain dicts: networkx takes ~0.1 s to
    import, a fifth of a command-line run, and is imported only to describe a cycle."""

    feeds: dict[str, list[str]]
    fed_by: dict[str, list[str]]

    def reach(self, start: str, links: dict[str, list[str]]) -> set[str]:
        """Every node reached from `start` along `links` (start itself only via a cycle)."""
        seen: set[str] = set()
        todo = list(links[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(links[node])
        return seen

    def has_cycle(self) -> bool:
        waiting = {node: len(sources) for node, sources in self.fed_by.items()}
        free = [node for node, count in waiting.items() if not count]
        ordered = 0
        while free:
            ordered += 1
            for target in self.feeds[free.pop()]:
                waiting[target] -= 1
                if not waiting[target]:
                    free.append(target)
        return ordered < len(waiting)


def _graph(analysis: Analysis) -> _Graph:
    feeds: dict[str, list[str]] = {node: [] for node in analysis.nodes}
    fed_by: dict[str, list[str]] = {node: [] for node in analysis.nodes}
    for edge in analysis.flow.edges:
        source, target = edge.source.node, edge.target.node
        if source in analysis.nodes and target in analysis.nodes and target not in feeds[source]:
            feeds[source].append(target)
            fed_by[target].append(source)
    return _Graph(feeds, fed_by)


def _check_cycles(analysis: Analysis, graph: _Graph) -> bool:
    if not graph.has_cycle():
        return False
    import networkx as nx

    digraph: nx.DiGraph[str] = nx.DiGraph()
    digraph.add_nodes_from(analysis.nodes)
    for edge in analysis.flow.edges:
        if edge.source.node in analysis.nodes and edge.target.node in analysis.nodes:
            digraph.add_edge(edge.source.node, edge.target.node)
    for component in nx.strongly_connected_components(digraph):
        first = min(component)
        if len(component) == 1 and not digraph.has_edge(first, first):
            continue
        cycle = nx.find_cycle(digraph.subgraph(component), source=first)
        path = " -> ".join([str(u) for u, _ in cycle] + [str(cycle[0][0])])
        analysis.add("cycle", f"cycle: {path} (loops belong in a sub-flow block)", node=first)
    return True


def _check_interface(analysis: Analysis, graph: _Graph, has_cycle: bool) -> None:  # noqa: C901
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
        fed |= graph.reach(node_id, graph.feeds)
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
        useful |= graph.reach(node_id, graph.fed_by)
    for node_id in analysis.nodes:
        if node_id not in useful:
            analysis.add(
                "unused_node", f"node {node_id!r} feeds no output", node=node_id, severity="warning"
            )


def analyse(
    flow: Flow, registry: Registry, apps: AppResolver | None = None, app: str | None = None
) -> Analysis:
    """Check a flow completely; `analysis.problems` holds everything found. `apps` reads the
    apps that sub-flow nodes refer to; `app` is the slug of the app this flow is saved to,
    so that a chain of references coming back to it is found before it is published."""
    context = _Context(registry, apps, app, flow, [f"app {app}@published"] if app else [])
    analysis = Analysis(flow)
    _analyse_into(analysis, context)
    # Sub-flows no node calls yet (a group being built) are checked all the same.
    for name in flow.subflows or {}:
        _local_subflow(analysis, context, name)
    for name, sub in analysis.subflows.items():
        for problem in sub.problems:
            where = f"{name}/{problem.node}" if problem.node else name
            analysis.problems.append(
                Problem(
                    problem.code,
                    f"in sub-flow {name!r}: {problem.message}",
                    where,
                    problem.port,
                    problem.severity,
                )
            )
    return analysis


def validate(
    flow: Flow, registry: Registry, apps: AppResolver | None = None, app: str | None = None
) -> list[Problem]:
    return analyse(flow, registry, apps, app).problems


def _analyse_into(analysis: Analysis, context: _Context) -> None:
    flow = analysis.flow
    _resolve_nodes(analysis, context.registry)
    _apply_error_policies(analysis)
    _resolve_subflow_ports(analysis, context)
    seen: set[tuple[str, str, str]] = set()
    for edge in flow.edges:
        _check_edge(analysis, edge, seen)
    _check_required_inputs(analysis)
    graph = _graph(analysis)
    has_cycle = _check_cycles(analysis, graph)
    _check_interface(analysis, graph, has_cycle)


# -- error policies ----------------------------------------------------------------------------


def _is_error_port(info: NodeInfo, port: str) -> bool:
    """Whether `port` is the `error` port an error policy adds (not a block's own)."""
    policy = info.node.on_error
    return (
        port == ERROR_PORT
        and policy is not None
        and policy.fallback == "error_branch"
        and ERROR_PORT not in info.spec.outputs
    )


def _apply_error_policies(analysis: Analysis) -> None:
    for node_id, info in analysis.nodes.items():
        policy = info.node.on_error
        if policy is None:
            continue
        if policy.fallback == "error_branch":
            if ERROR_PORT in info.spec.outputs:
                analysis.add(
                    "invalid_config",
                    f"on_error: block {info.spec.name!r} has an output named {ERROR_PORT!r} "
                    "already, so it cannot route failures to an error branch",
                    node=node_id,
                )
                continue
            info.outputs[ERROR_PORT] = PortSpec(
                ERROR_PORT,
                dict[str, Any],
                description="the failure (node, block, type, code, message) when it fails",
            )
        elif policy.fallback == "default":
            if info.spec.is_condition:
                analysis.add(
                    "invalid_config",
                    "on_error: a condition cannot fall back to a default value (which branch "
                    "would it take?); use fallback 'error_branch'",
                    node=node_id,
                )
            elif info.spec.multi_output and not (
                isinstance(policy.default, dict) and set(info.spec.outputs) <= set(policy.default)
            ):
                analysis.add(
                    "invalid_config",
                    f"on_error: the default of a block with several outputs is an object "
                    f"with a value for each ({', '.join(info.spec.outputs)})",
                    node=node_id,
                )


# -- sub-flows ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Context:
    """What checking sub-flow references needs across documents: the registry, the apps, the
    chain of sub-flows being checked (to name recursion) and the apps already read."""

    registry: Registry
    apps: AppResolver | None
    app: str | None  # the app the root document is saved to
    root: Flow
    stack: list[str]
    app_analyses: dict[str, Analysis] = field(default_factory=dict)


def interface_of(analysis: Analysis) -> Interface:
    """A (valid) flow's ports: its input nodes, typed by what they give, and its output
    nodes, typed by what feeds them (Any when several edges do)."""
    inputs: dict[str, PortSpec] = {}
    outputs: dict[str, Any] = {}
    feeding: dict[str, list[Any]] = defaultdict(list)
    for edge in analysis.edges:
        source = analysis.nodes[edge.source.node]
        feeding[edge.target.node].append(source.outputs[edge.source.port].type)
    for node_id, info in analysis.nodes.items():
        if info.config is None or info.spec.role == "step":
            continue
        name = str(getattr(info.config, "name", node_id))
        if info.spec.role == "flow_input":
            default = getattr(info.config, "default", None)
            required = bool(getattr(info.config, "required", True)) and default is None
            inputs[name] = PortSpec(name, info.spec.outputs["output"].type, required, default)
        else:
            types = feeding[node_id]
            outputs[name] = types[0] if len(types) == 1 else Any
    return Interface(inputs, outputs)


def _key(analysis: Analysis, ref: SubflowRef) -> str:
    """How a sub-flow is named in the chain of calls (and in a recursion's message)."""
    if ref.subflow is not None:
        return f"{analysis.document}subflow {ref.subflow!r}"
    return f"app {ref.app}@{ref.version}"


def _local_subflow(analysis: Analysis, context: _Context, name: str) -> Analysis | str:
    """The analysis of the document's sub-flow `name` (done once), or why there is none."""
    found = analysis.subflows.get(name)
    if found is not None:
        return found
    flow = analysis.flow
    if name not in (flow.subflows or {}):
        known = ", ".join(flow.subflows or {}) or "none"
        return f"no sub-flow {name!r} in this flow (sub-flows: {known})"
    sub = Analysis(flow.subflow(name), subflows=analysis.subflows, document=analysis.document)
    context.stack.append(_key(analysis, SubflowRef(subflow=name)))
    try:
        _analyse_into(sub, context)
    finally:
        context.stack.pop()
    analysis.subflows[name] = sub
    return sub


def _app_subflow(context: _Context, ref: SubflowRef) -> Analysis | str:
    """The analysis of an app's flow, or why there is none."""
    key = _key(Analysis(context.root), ref)
    found = context.app_analyses.get(key)
    if found is not None:
        return found
    if context.apps is None:
        return "app references are resolved by a dagwright server; this flow runs without one"
    if ref.app == context.app and ref.version == "published":
        flow = context.root  # the document being saved is what the app will publish
    else:
        try:
            flow = context.apps.app_flow(ref.app or "", ref.version)
        except DagwrightError as exc:
            return exc.message
    sub = Analysis(flow, document=f"{key}: ")
    context.stack.append(key)
    try:
        _analyse_into(sub, context)
    finally:
        context.stack.pop()
    context.app_analyses[key] = sub
    return sub


def _resolve_subflow_ports(analysis: Analysis, context: _Context) -> None:
    """The ports of sub-flow nodes, from the interface of the sub-flow each one runs."""
    for node_id, info in analysis.nodes.items():
        config = info.config
        if not isinstance(config, SubflowConfig):
            continue
        ref = config.ref()
        key = _key(analysis, ref)
        if key in context.stack:
            chain = context.stack[context.stack.index(key) :]
            analysis.add(
                "subflow_recursion",
                f"{ref} calls itself: {' -> '.join([*chain, key])}",
                node=node_id,
            )
            info.config = None
            continue
        if ref.subflow is not None:
            sub = _local_subflow(analysis, context, ref.subflow)
            code = "unknown_subflow"
        else:
            sub = _app_subflow(context, ref)
            code = "subflow_unavailable" if context.apps is None else "unknown_app"
        if isinstance(sub, str):
            analysis.add(code, f"{ref}: {sub}", node=node_id)
            info.config = None
            continue
        if not sub.ok:
            first = next(p for p in sub.problems if p.severity == "error")
            analysis.add("subflow_invalid", f"{ref} has errors; the first: {first}", node=node_id)
            info.config = None
            continue
        try:
            inputs, output_types = config.ports(interface_of(sub))
        except ValueError as exc:
            analysis.add("invalid_config", f"{ref}: {exc}", node=node_id)
            info.config = None
            continue
        info.inputs = {**info.spec.inputs, **inputs}
        for name, port_type in output_types.items():
            port = info.outputs[name]
            info.outputs[name] = PortSpec(name, port_type, description=port.description)

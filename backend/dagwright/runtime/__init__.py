"""The runtime: flow format, validation, compilation and the async executor.

It knows nothing of HTTP or databases: it takes a flow and inputs and yields events.
"""

from dagwright.runtime.events import (
    IterationFinished,
    IterationStarted,
    NodeCancelled,
    NodeEvent,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    NodeUsage,
    RunError,
    RunEvent,
    RunFinished,
    RunStarted,
)
from dagwright.runtime.executor import (
    SKIPPED,
    Executor,
    ExecutorOptions,
    NodeTimeoutError,
    ReusedOutput,
    Run,
    RunResult,
)
from dagwright.runtime.flow import (
    Edge,
    ErrorPolicy,
    Flow,
    Node,
    PortRef,
    SubFlow,
    load_flow,
    loads_flow,
    parse_flow,
)
from dagwright.runtime.plan import CompiledFlow, compile_flow
from dagwright.runtime.subflow import AppFlows, AppResolver, SubflowRef
from dagwright.runtime.trace import (
    IterationTrace,
    NodeTrace,
    RunTrace,
    build_trace,
    iteration_nodes,
)
from dagwright.runtime.validate import FlowInvalidError, Problem, analyse, validate

__all__ = [
    "SKIPPED",
    "AppFlows",
    "AppResolver",
    "CompiledFlow",
    "Edge",
    "ErrorPolicy",
    "Executor",
    "ExecutorOptions",
    "Flow",
    "FlowInvalidError",
    "IterationFinished",
    "IterationStarted",
    "IterationTrace",
    "Node",
    "NodeCancelled",
    "NodeEvent",
    "NodeFailed",
    "NodeFinished",
    "NodeMessage",
    "NodeSkipped",
    "NodeStarted",
    "NodeTimeoutError",
    "NodeTrace",
    "NodeUsage",
    "PortRef",
    "Problem",
    "ReusedOutput",
    "Run",
    "RunError",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunTrace",
    "SubFlow",
    "SubflowRef",
    "analyse",
    "build_trace",
    "compile_flow",
    "iteration_nodes",
    "load_flow",
    "loads_flow",
    "parse_flow",
    "validate",
]

"""The runtime: flow format, validation, compilation and the async executor.

It knows nothing of HTTP or databases: it takes a flow and inputs and yields events.
"""

from dagwright.runtime.events import (
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
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
from dagwright.runtime.flow import Edge, Flow, Node, PortRef, load_flow, loads_flow, parse_flow
from dagwright.runtime.plan import CompiledFlow, compile_flow
from dagwright.runtime.trace import NodeTrace, build_trace
from dagwright.runtime.validate import FlowInvalidError, Problem, analyse, validate

__all__ = [
    "SKIPPED",
    "CompiledFlow",
    "Edge",
    "Executor",
    "ExecutorOptions",
    "Flow",
    "FlowInvalidError",
    "Node",
    "NodeCancelled",
    "NodeFailed",
    "NodeFinished",
    "NodeMessage",
    "NodeSkipped",
    "NodeStarted",
    "NodeTimeoutError",
    "NodeTrace",
    "PortRef",
    "Problem",
    "ReusedOutput",
    "Run",
    "RunError",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "analyse",
    "build_trace",
    "compile_flow",
    "load_flow",
    "loads_flow",
    "parse_flow",
    "validate",
]

"""Sub-flows: what a sub-flow node refers to, the ports it derives from the sub-flow's
interface, and the host that runs a compiled sub-flow as a child of the running flow.

A child run is a `Run` of the same executor with a scope (runtime/scope.py): it shares the
root run's id, clock, usage and global concurrency slots, and its events go to the parent's
stream with node ids prefixed by a path (`refine[2]/check`), so one trace holds every span.
The sub-flow is compiled once (with the flow that calls it, or once per call for an app
reference) and each child run only allocates its per-run state.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dagwright.errors import DagwrightError, InputError
from dagwright.registry import APPS, PortSpec, Service
from dagwright.registry.services import check_needs
from dagwright.runtime.events import (
    IterationFinished,
    IterationStarted,
    IterationStatus,
    NodeEvent,
    RunEvent,
)
from dagwright.runtime.pause import WaitingForHuman, is_pause
from dagwright.runtime.scope import RunScope

if TYPE_CHECKING:
    from dagwright.runtime.events import RunFinished
    from dagwright.runtime.executor import Run
    from dagwright.runtime.flow import Flow
    from dagwright.runtime.plan import CompiledFlow

MAX_DEPTH: Final = 16  # nested sub-flow calls; stops recursion across apps at run time
APP_REF: Final = re.compile(r"([a-z0-9][a-z0-9-]{1,62})(?:@(published|[0-9]+))?")
SUBFLOW_TAG: Final = "subflow"  # the tag of blocks whose config is a SubflowConfig
# The run's sub-flow host, given by the runtime itself to runs whose flow calls sub-flows.
SUBFLOWS: Final[Service[SubflowHost]] = Service("subflows", "sub-flow runs (the runtime)")


class SubflowError(DagwrightError):
    """A sub-flow call, map item or repeat round that did not succeed; the message names
    the iteration and the inner node."""

    code = "subflow_failed"


class SubflowDepthError(DagwrightError):
    code = "subflow_depth"


class SubflowUnavailableError(DagwrightError):
    """An app reference with no server to resolve it (a flow run from a file)."""

    code = "subflow_unavailable"


@dataclass(frozen=True, slots=True)
class SubflowRef:
    """A sub-flow of the same document (`subflow`) or an app's version (`app`, `version`)."""

    subflow: str | None = None
    app: str | None = None
    version: str = "published"

    def __str__(self) -> str:
        return f"subflow {self.subflow!r}" if self.subflow else f"app {self.app}@{self.version}"


@dataclass(frozen=True, slots=True)
class Interface:
    """A sub-flow's ports: its input nodes (typed by what they give) and output nodes (typed
    by what feeds them)."""

    inputs: Mapping[str, PortSpec]
    outputs: Mapping[str, Any]


class SubflowConfig(BaseModel):
    """The part of a sub-flow node's configuration that says which sub-flow it runs.
    Subclasses say how the sub-flow's interface becomes the node's ports."""

    model_config = ConfigDict(extra="forbid")

    subflow: str | None = Field(None, description="A sub-flow stored in this flow, by name.")
    app: str | None = Field(
        None,
        description="An app by reference: 'slug@3' pins version 3, 'slug@published' (or "
        "'slug') follows the published version.",
    )

    @model_validator(mode="after")
    def _one_reference(self) -> SubflowConfig:
        if (self.subflow is None) == (self.app is None):
            raise ValueError("give exactly one of 'subflow' (in this flow) and 'app' (by slug)")
        if self.app is not None and APP_REF.fullmatch(self.app) is None:
            raise ValueError(
                f"app {self.app!r} is not a reference: use 'slug', 'slug@3' or 'slug@published'"
            )
        return self

    def ref(self) -> SubflowRef:
        if self.subflow is not None:
            return SubflowRef(subflow=self.subflow)
        found = APP_REF.fullmatch(self.app or "")
        assert found is not None  # the validator refused anything else
        return SubflowRef(app=found[1], version=found[2] or "published")

    def ports(self, interface: Interface) -> tuple[dict[str, PortSpec], dict[str, Any]]:
        """The node's input ports and output port types for this sub-flow; raises ValueError
        naming what does not fit (a port the sub-flow lacks, say)."""
        raise NotImplementedError


def pick_output(outputs: Mapping[str, Any], name: str | None, where: str) -> Any:
    """The one output a node returns (`name`), or every output as a dict."""
    if name is None:
        return dict(outputs)
    if name not in outputs:
        known = ", ".join(outputs) or "none"
        raise SubflowError(f"{where} returned no output {name!r} (outputs: {known})")
    return outputs[name]


class AppResolver(Protocol):
    """How validation reads an app's flow (the service layer; none when run from a file)."""

    def app_flow(self, app: str, version: str) -> Flow:
        """Raises NotFoundError (with its code) when there is no such app or version."""
        ...


class AppFlows:
    """How a run gets an app's compiled flow. Implemented by the service that also invokes
    apps, and found through the run's APPS service, so the places that build a run's
    services need nothing new."""

    async def compiled_app(self, app: str, version: str) -> CompiledFlow:
        raise NotImplementedError


class SubflowHost:
    """The run's side of sub-flow nodes: given to blocks as `ctx.service(SUBFLOWS)`."""

    __slots__ = ("_child_options", "_run")

    def __init__(self, run: Run) -> None:
        self._run = run
        # A child has no deadline of its own: the root run's timeout covers it.
        self._child_options = dataclasses.replace(run._options, run_timeout=None)

    async def plan(self, ref: SubflowRef) -> CompiledFlow:
        if ref.subflow is not None:
            return self._run.plan.subflows[ref.subflow]
        services = self._run._options.services
        invoker = services.get(APPS) if services.provides(APPS) else None
        if not isinstance(invoker, AppFlows):
            raise SubflowUnavailableError(
                f"{ref} needs a dagwright server to resolve it (this run has no app service)"
            )
        assert ref.app is not None
        plan = await invoker.compiled_app(ref.app, ref.version)
        # An app's flow is known only now: its needs are checked before it runs.
        check_needs(
            ((node.id, node.spec.needs_for(node.config)) for node in plan.every_node()), services
        )
        return plan

    async def run(
        self, node_id: str, index: int | None, plan: CompiledFlow, inputs: Mapping[str, Any]
    ) -> RunFinished:
        """Run the sub-flow once as a child span of `node_id` (iteration `index` of a map or
        repeat, None for a single call), announced by iteration events. A child that fails
        is returned, not raised: the caller's policy decides, and a child that paused for a
        person (runtime/pause.py) is returned too. Cancelling the caller cancels the child
        run, and with it every node it has running."""
        from dagwright.runtime.executor import Run, resolve_inputs, split_reuse

        run = self._run
        depth = run.depth + 1
        if depth > MAX_DEPTH:
            raise SubflowDepthError(
                f"node {node_id!r} would nest sub-flows {depth} deep; the limit is {MAX_DEPTH} "
                "(does a sub-flow or app call itself?)"
            )
        emit = run._emit
        emit(IterationStarted(run.run_id, run._now(), node_id, index))
        started = time.perf_counter()
        prefix = f"{node_id}/" if index is None else f"{node_id}[{index}]/"
        try:
            values = resolve_inputs(plan, inputs)
        except InputError as exc:
            took = time.perf_counter() - started
            emit(IterationFinished(run.run_id, run._now(), node_id, index, "failed", took, None))
            raise SubflowError(f"{_where(node_id, index)}: {exc.message}") from None
        path = run.path + prefix
        scope = RunScope(run.run_id, run._t0, run._usage, _forwarder(emit, prefix), depth, path)
        reuse, inner = split_reuse(plan, run.inner_reuse.get(prefix, {}))
        child = Run(
            plan,
            values,
            run.run_id,
            self._child_options,
            run._slots,
            reuse,
            scope,
            inner,
        )
        try:
            result = await child.run_here()
        except BaseException:
            took = time.perf_counter() - started
            emit(IterationFinished(run.run_id, run._now(), node_id, index, "cancelled", took, None))
            raise
        took = time.perf_counter() - started
        error = None if result.error is None else result.error.message
        status: IterationStatus = "waiting" if is_pause(result.error) else result.status
        emit(
            IterationFinished(
                run.run_id, run._now(), node_id, index, status, took, error, result.outputs
            )
        )
        return result


def _where(node_id: str, index: int | None) -> str:
    return f"{node_id}" if index is None else f"{node_id}[{index}]"


def failure(node_id: str, index: int | None, result: RunFinished) -> DagwrightError:
    """The error for an iteration that did not succeed, naming the iteration and inner node:
    WaitingForHuman for one that paused for a person (the pause goes up to the root run)."""
    error = result.error
    if is_pause(error):
        assert error is not None
        return WaitingForHuman(f"{_where(node_id, index)}: {error.message}")
    message = "no error recorded" if error is None else error.message
    failed = SubflowError(f"{_where(node_id, index)} {result.status}: {message}")
    if error is not None and error.code not in ("node_failed", "cancelled"):
        failed.code = error.code  # a typed inner error (a timeout, say) keeps its code
    return failed


def _forwarder(emit: Callable[[RunEvent], None], prefix: str) -> Callable[[RunEvent], None]:
    def forward(event: RunEvent) -> None:
        if isinstance(event, NodeEvent):
            # The child's events are its own objects, seen by no one else: renamed in place.
            event.node = prefix + event.node
            emit(event)
        # else the child's RunStarted and RunFinished: the iteration events stand for them

    return forward

"""Declaring a block: a tiny typed function with a decorator.

    class Config(BaseModel):
        separator: str = " "

    @block("text_join", category="data_process", description="Join texts into one.",
           example="['a', 'b'] -> 'a b'", inline=True)
    def text_join(config: Config, texts: list[str]) -> str:
        '''The docstring is what a user reads in the editor.'''
        return config.separator.join(texts)

- `config` (a pydantic model) is the block's configuration; omit it for none.
- Every other parameter is an input port typed by its annotation; a default makes it optional.
  `Annotated[str, "what it is"]` gives the port a description.
- The return annotation is the output port `output`; a TypedDict gives several named ports;
  `Route[T]` makes a condition block whose output goes down one named branch.
- A parameter annotated `NodeContext` receives the running node's context (events, ids).
- `**ports: T` takes input ports whose names come from the configuration (`dynamic_ports`).
- async functions run on the event loop. Sync ones are timed by the executor: a block type
  whose calls stay under a budget (1 ms) runs on the loop, since a thread hop would cost more
  than the work, and one that runs longer moves to worker threads for good
  (runtime/executor.py, SyncPolicy). `inline=True` always runs on the loop (pure, quick
  work); `blocking=True` always runs in a thread (I/O, sleeps, long computations), which also
  spares the first calls a measurement.
- `side_effects=` says what running the block twice would do, for durable runs that resume
  on another worker after a crash (services/queue): "none" (the default: nothing outside the
  run changes), "retryable" (it acts on the world, and doing so again is acceptable: it is
  run at least once), "not_retryable" (twice is worse than failing: a run whose worker died
  while the block was running fails with `not_retryable` instead of running it again).
  Or a function of the config saying which (http_request: a GET is "none", a POST
  "not_retryable").
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict

from dagwright.errors import BlockConfigError, BlockDefinitionError
from dagwright.registry.context import NodeContext
from dagwright.registry.services import Service
from dagwright.registry.types import json_schema, strip_annotated, type_name, unsupported_reason

Category = Literal["input", "data_process", "condition", "llm", "invoke", "tool"]
CATEGORIES: tuple[Category, ...] = typing.get_args(Category)

# What a block is for the runtime: most are steps; input blocks take a value given to the run
# and output blocks name a value the run returns.
Role = Literal["step", "flow_input", "flow_output"]
# inline: on the loop; async: awaited; thread: a worker thread; auto: a sync block timed by
# the executor, on the loop while its calls are quick, else in threads.
ExecutionMode = Literal["inline", "async", "thread", "auto"]
# What a second call of the block would do (see the module docstring).
SideEffects = Literal["none", "retryable", "not_retryable"]
SIDE_EFFECTS: tuple[SideEffects, ...] = typing.get_args(SideEffects)

T = TypeVar("T")
ConfigT = TypeVar("ConfigT", bound=BaseModel)

DEFAULT_OUTPUT = "output"


@dataclass(slots=True, frozen=True)
class Route(Generic[T]):
    """What a condition block returns: the branch taken and the value sent down it."""

    branch: str
    value: T


class NoConfig(BaseModel):
    """The configuration of a block that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass(slots=True, frozen=True)
class PortSpec:
    name: str
    type: Any
    required: bool = True
    default: Any = None
    description: str = ""

    def to_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "name": self.name,
            "type": type_name(self.type),
            "schema": json_schema(self.type),
            "required": self.required,
            "description": self.description,
        }
        if not self.required:
            schema["default"] = self.default
        return schema


@dataclass(slots=True, frozen=True)
class BlockSpec:
    """Everything the registry, validator, executor and editor need to know of a block."""

    name: str
    category: Category
    description: str
    example: str
    doc: str
    fn: Callable[..., Any]
    module: str
    config_model: type[BaseModel]
    config_param: str | None
    context_param: str | None
    inputs: Mapping[str, PortSpec]
    outputs: Mapping[str, PortSpec]
    multi_output: bool
    mode: ExecutionMode
    role: Role = "step"
    branches: Sequence[str] | Callable[[Any], Sequence[str]] | None = None
    dynamic_ports: Callable[[Any], Sequence[str]] | None = None
    dynamic_port_type: Any = Any
    timeout: float | None = None
    tags: tuple[str, ...] = field(default=())
    side_effects: SideEffects | Callable[[Any], SideEffects] = "none"

    @property
    def retryable(self) -> bool:
        """Whether a run resumed after a crash may call any node of the block again (one whose
        side effects depend on the config: see retryable_for)."""
        return not callable(self.side_effects) and self.side_effects != "not_retryable"

    def side_effects_for(self, config: BaseModel) -> SideEffects:
        """What calling a node of this block with this config twice would do."""
        if callable(self.side_effects):
            return self.side_effects(config)
        return self.side_effects

    def retryable_for(self, config: BaseModel) -> bool:
        """Whether a run resumed after a crash may call this node again."""
        return self.side_effects_for(config) != "not_retryable"

    # The services the block looks up (registry/services.py), or a function of the config
    # saying which (a secret only when one is named): a run that lacks one fails at its
    # start, naming the service and the nodes.
    needs: Sequence[Service[Any]] | Callable[[Any], Sequence[Service[Any]]] = field(default=())

    @property
    def is_condition(self) -> bool:
        return self.branches is not None

    def input_ports(self, config: BaseModel) -> dict[str, PortSpec]:
        """The input ports for one configuration: declared ports plus dynamic ones."""
        if self.dynamic_ports is None:
            return dict(self.inputs)
        ports = dict(self.inputs)
        taken = {self.config_param, self.context_param}
        for name in self.dynamic_ports(config):
            if name in ports or name in taken:
                # A port must not shadow a declared port, the config or the context.
                raise BlockConfigError(f"port name {name!r} is reserved by the block")
            if not name.isidentifier():
                raise BlockConfigError(f"port name {name!r} is not an identifier")
            ports[name] = PortSpec(name=name, type=self.dynamic_port_type)
        return ports

    def needs_for(self, config: BaseModel) -> Sequence[Service[Any]]:
        """The services a node of this block with this config looks up."""
        return self.needs(config) if callable(self.needs) else self.needs

    def branch_names(self, config: BaseModel) -> list[str]:
        if self.branches is None:
            return []
        if callable(self.branches):
            return list(self.branches(config))
        return list(self.branches)

    def to_schema(self) -> dict[str, Any]:
        """The block as the editor sees it: forms and port colours are generated from this."""
        schema: dict[str, Any] = {
            "name": self.name,
            "category": self.category,
            "role": self.role,
            "description": self.description,
            "example": self.example,
            "doc": self.doc,
            "module": self.module,
            "config_schema": self.config_model.model_json_schema(),
            "inputs": [p.to_schema() for p in self.inputs.values()],
            "outputs": [p.to_schema() for p in self.outputs.values()],
            "mode": self.mode,
            # None: it depends on the config (see side_effects_for).
            "side_effects": None if callable(self.side_effects) else self.side_effects,
        }
        if self.dynamic_ports is not None:
            schema["dynamic_inputs"] = {
                "type": type_name(self.dynamic_port_type),
                "schema": json_schema(self.dynamic_port_type),
            }
        if self.branches is not None:
            schema["branches"] = None if callable(self.branches) else list(self.branches)
        return schema


def _fail(fn: Callable[..., Any], message: str) -> BlockDefinitionError:
    return BlockDefinitionError(f"block function {fn.__module__}.{fn.__qualname__}: {message}")


def _port_description(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Annotated:
        notes = [a for a in typing.get_args(annotation)[1:] if isinstance(a, str)]
        return " ".join(notes)
    return ""


def _check_port_type(fn: Callable[..., Any], what: str, annotation: Any) -> Any:
    reason = unsupported_reason(annotation)
    if reason:
        raise _fail(fn, f"{what}: {reason}")
    return strip_annotated(annotation)


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _analyse_outputs(
    fn: Callable[..., Any], annotation: Any
) -> tuple[dict[str, PortSpec], bool, bool]:
    """Output ports, whether they are several, and whether the block is a condition."""
    if annotation is inspect.Signature.empty:
        raise _fail(fn, "the return annotation is missing (it types the output port)")
    if typing.get_origin(annotation) is Route or annotation is Route:
        args = typing.get_args(annotation)
        value_type = _check_port_type(fn, "output", args[0] if args else Any)
        return {DEFAULT_OUTPUT: PortSpec(DEFAULT_OUTPUT, value_type)}, False, True
    if _is_typeddict(annotation):
        hints = get_type_hints(annotation, include_extras=True)
        ports = {
            name: PortSpec(
                name,
                _check_port_type(fn, f"output {name!r}", hint),
                description=_port_description(hint),
            )
            for name, hint in hints.items()
        }
        if not ports:
            raise _fail(fn, "the output TypedDict declares no ports")
        return ports, True, False
    port_type = _check_port_type(fn, "output", annotation)
    return {DEFAULT_OUTPUT: PortSpec(DEFAULT_OUTPUT, port_type, description="")}, False, False


def block(
    name: str,
    *,
    category: Category,
    description: str,
    example: str = "",
    inline: bool = False,
    blocking: bool = False,
    role: Role = "step",
    branches: Sequence[str] | Callable[[Any], Sequence[str]] | None = None,
    dynamic_ports: Callable[[Any], Sequence[str]] | None = None,
    timeout: float | None = None,
    tags: Sequence[str] = (),
    side_effects: SideEffects | Callable[[Any], SideEffects] = "none",
    needs: Sequence[Service[Any]] | Callable[[Any], Sequence[Service[Any]]] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a block. The function stays callable as it was; the spec is attached to it.
    `needs`: the services it looks up with `ctx.service(...)` (registry/services.py), or a
    function of its config that says which."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__dagwright_block__ = _build_spec(  # type: ignore[attr-defined]
            fn,
            name=name,
            category=category,
            description=description,
            example=example,
            inline=inline,
            blocking=blocking,
            role=role,
            branches=branches,
            dynamic_ports=dynamic_ports,
            timeout=timeout,
            tags=tuple(tags),
            side_effects=side_effects,
            needs=needs if callable(needs) else tuple(needs),
        )
        return fn

    return decorate


def spec_of(obj: Any) -> BlockSpec | None:
    spec = getattr(obj, "__dagwright_block__", None)
    return spec if isinstance(spec, BlockSpec) else None


def _build_spec(  # noqa: C901, PLR0912, PLR0915
    fn: Callable[..., Any],
    *,
    name: str,
    category: Category,
    description: str,
    example: str,
    inline: bool,
    blocking: bool,
    role: Role,
    branches: Sequence[str] | Callable[[Any], Sequence[str]] | None,
    dynamic_ports: Callable[[Any], Sequence[str]] | None,
    timeout: float | None,
    tags: tuple[str, ...],
    side_effects: SideEffects | Callable[[Any], SideEffects] = "none",
    needs: Sequence[Service[Any]] | Callable[[Any], Sequence[Service[Any]]] = (),
) -> BlockSpec:
    if not name.replace("_", "").isalnum() or not name[0].isalpha():
        raise _fail(fn, f"block name {name!r} must be letters, digits and _ (starting a letter)")
    if category not in CATEGORIES:
        raise _fail(fn, f"category {category!r} is not one of {', '.join(CATEGORIES)}")
    if not description.strip() or "\n" in description:
        raise _fail(fn, "description must be one non-empty line")
    doc = inspect.getdoc(fn)
    if not doc:
        raise _fail(fn, "a docstring is required: it is what users read in the editor")
    is_async = inspect.iscoroutinefunction(fn)
    if is_async and inline:
        raise _fail(fn, "inline=True is for sync functions; async ones already run on the loop")
    if is_async and blocking:
        raise _fail(fn, "blocking=True is for sync functions; an async one must not block")
    if inline and blocking:
        raise _fail(fn, "inline=True and blocking=True contradict each other: choose one")
    if not callable(side_effects) and side_effects not in SIDE_EFFECTS:
        raise _fail(fn, f"side_effects {side_effects!r} is not one of {', '.join(SIDE_EFFECTS)}")
    mode: ExecutionMode = "async"
    if not is_async:
        mode = "inline" if inline else "thread" if blocking else "auto"

    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # a forward reference that does not resolve, say
        raise _fail(fn, f"annotations cannot be resolved: {exc}") from exc
    signature = inspect.signature(fn)

    config_model: type[BaseModel] = NoConfig
    config_param: str | None = None
    context_param: str | None = None
    dynamic_port_type: Any = Any
    has_var_keyword = False
    inputs: dict[str, PortSpec] = {}
    for param in signature.parameters.values():
        annotation = hints.get(param.name, inspect.Signature.empty)
        if annotation is inspect.Signature.empty:
            raise _fail(fn, f"parameter {param.name!r} has no type annotation")
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise _fail(fn, f"*{param.name} is not supported; use a list port")
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            has_var_keyword = True
            dynamic_port_type = _check_port_type(fn, f"**{param.name}", annotation)
            continue
        if param.name == "config":
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                raise _fail(fn, "the 'config' parameter must be annotated with a pydantic model")
            config_model, config_param = annotation, param.name
            continue
        if annotation is NodeContext:
            context_param = param.name
            continue
        port_type = _check_port_type(fn, f"input {param.name!r}", annotation)
        has_default = param.default is not inspect.Parameter.empty
        inputs[param.name] = PortSpec(
            name=param.name,
            type=port_type,
            required=not has_default,
            default=param.default if has_default else None,
            description=_port_description(annotation),
        )
    if needs and context_param is None:
        raise _fail(fn, "a block that needs services takes a NodeContext to look them up")
    if has_var_keyword != (dynamic_ports is not None):
        raise _fail(fn, "**ports and dynamic_ports= go together: declare both or neither")

    outputs, multi_output, is_condition = _analyse_outputs(
        fn, hints.get("return", inspect.Signature.empty)
    )
    if is_condition != (branches is not None):
        raise _fail(fn, "a condition block returns Route[T] and declares branches=, both or none")
    if is_condition and category != "condition":
        raise _fail(fn, "blocks returning Route[T] belong to the 'condition' category")
    if role == "flow_input" and list(inputs) != ["value"]:
        raise _fail(fn, "an input block takes exactly one port-like parameter, 'value'")
    if role == "flow_output" and "value" not in inputs:
        raise _fail(fn, "an output block takes the value to return as parameter 'value'")
    if role != "step" and category != "input":
        raise _fail(fn, "input and output blocks belong to the 'input' category")

    return BlockSpec(
        name=name,
        category=category,
        description=description.strip(),
        example=example,
        doc=doc,
        fn=fn,
        module=fn.__module__,
        config_model=config_model,
        config_param=config_param,
        context_param=context_param,
        # An input block's `value` is given to the run, not wired to an edge.
        inputs={} if role == "flow_input" else inputs,
        outputs=outputs,
        multi_output=multi_output,
        mode=mode,
        role=role,
        branches=branches,
        dynamic_ports=dynamic_ports,
        dynamic_port_type=dynamic_port_type,
        timeout=timeout,
        tags=tags,
        side_effects=side_effects,
        needs=needs,
    )

"""The `human_input` block: pause the run until a person answers a form (or it times out).
Each choice is a branch; `timeout` is the branch taken when nobody answers in time."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dagwright.registry import HUMAN, NodeContext, Route, block
from dagwright.runtime.pause import WaitingForHuman
from dagwright.templating import check_template, render

_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class HumanField(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_NAME, description="The answer's key in this node's output.")
    type: Literal["text", "number", "integer", "boolean"] = "text"
    label: str = Field("", description="What the form shows; empty: the name.")
    required: bool = True
    default: Any = Field(None, description="The value when it is not answered (and on timeout).")


class HumanInputConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(
        description="What the person is asked: a template over this node's inputs."
    )
    fields: list[HumanField] = Field(default_factory=list, description="The form's fields.")
    choices: list[str] = Field(
        default_factory=list,
        description="Buttons, each a branch of this node (e.g. approve, reject); none: one "
        "branch, 'answered'.",
    )
    timeout_s: float | None = Field(
        None, gt=0, description="Seconds to wait; then the 'timeout' branch, with the defaults."
    )
    inputs: list[str] = Field(
        default_factory=list, description="Input ports, the message's template variables."
    )

    @field_validator("message")
    @classmethod
    def _template(cls, text: str) -> str:
        return check_template(text, "message")

    @model_validator(mode="after")
    def _distinct(self) -> HumanInputConfig:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError("fields: a name is given twice")
        if len(set(self.choices)) != len(self.choices) or "timeout" in self.choices:
            raise ValueError("choices must be distinct, and 'timeout' is the timeout's branch")
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError("inputs: a name is given twice")
        return self


def _branches(config: HumanInputConfig) -> list[str]:
    return [*(config.choices or ["answered"]), "timeout"]


def _input_ports(config: HumanInputConfig) -> list[str]:
    return list(config.inputs)


@block(
    "human_input",
    category="condition",
    description="Pause the run until someone answers a form; each choice is a branch.",
    example="choices [approve, reject] -> branch approve, {'comment': ..., 'choice': 'approve'}",
    branches=_branches,
    dynamic_ports=_input_ports,
    needs=(HUMAN,),
    # It writes a request; run again (a durable run resumed after its worker died) it finds
    # that request (HumanInbox.ask): one node, one request.
    side_effects="retryable",
)
async def human_input(config: HumanInputConfig, ctx: NodeContext, **inputs: Any) -> Route[Any]:
    """Writes a request (the message rendered from the inputs, the form) and pauses the run:
    it is `waiting` until someone answers through the API, the editor or the request's
    signed link, on any server, even after a restart. The run then goes on from here, with
    the answer ({field: value, ..., 'choice': branch}) as this node's output down the branch
    chosen; after `timeout_s` without an answer, down 'timeout' with the fields' defaults.
    Inside a map item, a repeat round or a sub-flow it pauses the whole run, under its path
    (`loop[2]/approve`)."""

    message = render(config.message, inputs, "message")
    form = {
        "fields": [f.model_dump() for f in config.fields],
        "choices": list(config.choices),
    }
    inbox = ctx.service(HUMAN)
    request = await asyncio.to_thread(
        inbox.ask, ctx.run_id, ctx.path, message, form, config.timeout_s
    )
    raise WaitingForHuman(f"waiting for an answer to request {request.id}: {message[:200]}")

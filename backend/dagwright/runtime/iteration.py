"""What the sub-flow blocks do (blocks/iteration.py declares them): one call, a map over a
list with bounded concurrency, and a repeat-until loop. Each run of the sub-flow is a child
span of the node (runtime/subflow.py); these functions only decide what runs and what the
node returns."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dagwright.runtime.pause import WaitingForHuman, is_pause
from dagwright.runtime.subflow import SubflowError, SubflowHost, SubflowRef, failure, pick_output

ItemPolicy = Literal["fail", "skip", "default"]
StopReason = Literal["until", "max_rounds"]


class RepeatExhaustedError(SubflowError):
    code = "repeat_exhausted"


async def call_once(
    host: SubflowHost,
    node_id: str,
    ref: SubflowRef,
    inputs: Mapping[str, Any],
    output: str | None,
) -> Any:
    plan = await host.plan(ref)
    result = await host.run(node_id, None, plan, inputs)
    if result.status != "succeeded":
        raise failure(node_id, None, result)
    return pick_output(result.outputs, output, str(ref))


@dataclass(frozen=True, slots=True)
class MapSpec:
    item: str  # the sub-flow input each item goes to
    index: str | None  # the sub-flow input the item's position goes to
    output: str | None  # the sub-flow output kept per item (None: all, as a dict)
    concurrency: int
    on_item_error: ItemPolicy
    default: Any


async def map_items(  # noqa: C901
    host: SubflowHost,
    node_id: str,
    ref: SubflowRef,
    items: Sequence[Any],
    constants: Mapping[str, Any],
    spec: MapSpec,
) -> tuple[list[Any], list[dict[str, Any]]]:
    """The results in input order (a skipped item leaves no entry) and the failures, by
    index. At most `spec.concurrency` items run at once; each finished item is announced
    at once (IterationFinished), so a long map shows its progress. Items that pause for a
    person do not stop the others: once every item has run, the map raises WaitingForHuman
    naming them, so one pause asks for every item's answer at once."""
    plan = await host.plan(ref)
    count = len(items)
    results: list[Any] = [None] * count
    kept = [True] * count
    failed: list[dict[str, Any]] = []
    paused: dict[int, str] = {}  # index -> why the item waits
    positions = iter(range(count))  # shared by the workers: each takes the next item

    async def worker() -> None:
        for i in positions:
            inputs = dict(constants)
            inputs[spec.item] = items[i]
            if spec.index is not None:
                inputs[spec.index] = i
            try:
                result = await host.run(node_id, i, plan, inputs)
                if is_pause(result.error):
                    paused[i] = failure(node_id, i, result).message
                    continue
                if result.status != "succeeded":
                    raise failure(node_id, i, result)
                results[i] = pick_output(result.outputs, spec.output, f"{node_id}[{i}]")
            except SubflowError as exc:
                if spec.on_item_error == "fail":
                    raise
                failed.append({"index": i, "code": exc.code, "error": exc.message})
                if spec.on_item_error == "skip":
                    kept[i] = False
                else:
                    results[i] = spec.default

    workers = min(spec.concurrency, count)
    if workers <= 1:
        await worker()  # no task to create: one item at a time runs in the node's own
    else:
        tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A failing item (policy "fail") or the run's cancellation: every item still
            # running stops now, each child run cancelling its own nodes.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    if paused:
        waiting = sorted(paused)
        raise WaitingForHuman(
            f"{len(waiting)} of {count} items wait for a person: "
            + "; ".join(paused[i] for i in waiting[:5])
            + ("; ..." if len(waiting) > 5 else "")
        )
    failed.sort(key=lambda entry: int(entry["index"]))
    if all(kept):
        return results, failed
    return [value for value, keep in zip(results, kept, strict=True) if keep], failed


@dataclass(frozen=True, slots=True)
class RepeatSpec:
    state: str  # the sub-flow input that takes the state and the output that gives the next
    until: str  # the sub-flow output that ends the loop when true
    round: str | None  # the sub-flow input the round number goes to
    max_rounds: int
    on_max_rounds: Literal["return", "fail"]


@dataclass(frozen=True, slots=True)
class RepeatOutcome:
    state: Any
    rounds: int
    stopped: StopReason
    outputs: dict[str, Any]  # the last round's outputs


async def repeat(
    host: SubflowHost,
    node_id: str,
    ref: SubflowRef,
    state: Any,
    constants: Mapping[str, Any],
    spec: RepeatSpec,
) -> RepeatOutcome:
    """Rounds of the sub-flow, each given the state the previous one returned, until its
    `until` output is true or `max_rounds` have run."""
    plan = await host.plan(ref)
    outputs: dict[str, Any] = {}
    for round_number in range(spec.max_rounds):
        inputs = dict(constants)
        inputs[spec.state] = state
        if spec.round is not None:
            inputs[spec.round] = round_number
        result = await host.run(node_id, round_number, plan, inputs)
        if result.status != "succeeded":
            raise failure(node_id, round_number, result)
        outputs = result.outputs
        where = f"{node_id}[{round_number}]"
        state = pick_output(outputs, spec.state, where)
        if outputs.get(spec.until):
            return RepeatOutcome(state, round_number + 1, "until", outputs)
    if spec.on_max_rounds == "fail":
        raise RepeatExhaustedError(
            f"{node_id}: {spec.until!r} was still false after {spec.max_rounds} rounds"
        )
    return RepeatOutcome(state, spec.max_rounds, "max_rounds", outputs)

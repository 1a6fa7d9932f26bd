"""Data-Copilot's offline phase (section 2.1 and Appendix E.1): for each request, the model
designs interfaces (or reuses the library's), each new one is tested on sampled sub-tables
with a repair loop fed by the error, then compared with the most similar interfaces of the
library (embedding similarity) and, when the model decides so, merged with one and the merged
interface is tested on the test cases of both; a merge that fails its tests is abandoned.

The model, the embeddings and the sandbox are passed in as functions, so the loop is the same
in a block and in a test, and every decision is in the returned log.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dagwright.errors import DagwrightError
from dagwright.methods.data_copilot.interface import Interface, InterfaceError

# tag, prompt -> the model's answer (tags: design, repair, merge)
Ask = Callable[[str, str], Awaitable[str]]
Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
# interface, arguments -> run on sampled sub-tables; raises InterfaceError
Try = Callable[[Interface, dict[str, Any]], Awaitable[Any]]


class DesignOutputError(DagwrightError):
    """The model's design is not the JSON asked for."""

    code = "model_output"


@dataclass(frozen=True, slots=True)
class DesignSettings:
    max_repairs: int = 2
    merge_threshold: float = 0.8  # cosine similarity from which the model is asked to merge
    top_n: int = 3


@dataclass(slots=True)
class DesignReport:
    library: list[Interface]
    log: list[dict[str, Any]] = field(default_factory=list)

    def note(self, step: str, **detail: Any) -> None:
        self.log.append({"step": step, **detail})


_FENCE = re.compile(r"```(?:json)?\s*(?P<body>.*?)```", re.S)


def parse_json(text: str) -> Any:
    """The JSON in an answer (a fenced block, else the whole answer)."""
    found = _FENCE.search(text)
    try:
        return json.loads(found.group("body") if found else text)
    except json.JSONDecodeError as exc:
        raise DesignOutputError(
            f"the model's answer is not JSON ({exc.msg}): {text[:120]!r}"
        ) from None


def _interface(value: Any) -> Interface:
    try:
        return Interface.model_validate(value)
    except ValidationError as exc:
        raise DesignOutputError(f"the model's interface is not valid: {exc}") from None


def describe(library: Sequence[Interface]) -> str:
    return "\n".join(f"- {i.signature()}: {i.description}" for i in library) or "(none yet)"


def design_prompt(request: str, source: str, library: Sequence[Interface]) -> str:
    return (
        "You are an experienced program coder. Given a request and some existing interfaces, "
        "you should use these interfaces to solve the request or design new interfaces to "
        "resolve it. Each interface is a Python function over pandas DataFrames that returns "
        "a DataFrame; its parameters are the tables it reads (by their last name part) and "
        "its inputs.\n"
        'Answer with JSON: {"interfaces": [{"name", "description", "inputs": [{"name", '
        '"type" (str|int|float|bool|date|list|table), "description"}], "tables": [qualified '
        'names], "code", "tests": [argument objects for test requests like this one]}], '
        '"solving": "how the request is solved with them"}. An empty list when the existing '
        "interfaces suffice.\n"
        f"###The user request: {request}\n###Data: {source}\n"
        f"###The existing interfaces:\n{describe(library)}"
    )


async def _tested(
    interface: Interface, ask: Ask, try_: Try, report: DesignReport, settings: DesignSettings
) -> Interface | None:
    """The interface once every test case runs, after at most `max_repairs` repairs."""
    for attempt in range(settings.max_repairs + 1):
        failure = await _first_failure(interface, try_)
        report.note("test", interface=interface.name, attempt=attempt, error=failure)
        if failure is None:
            return interface
        if attempt == settings.max_repairs:
            break
        answer = await ask(
            "repair",
            "The interface below fails its test. Fix the code; answer with the whole interface "
            f"as JSON (same fields).\n###Interface:\n{interface.model_dump_json()}\n"
            f"###Error:\n{failure}",
        )
        interface = _interface(parse_json(answer))
    report.note("rejected", interface=interface.name)
    return None


async def _first_failure(interface: Interface, try_: Try) -> str | None:
    for args in interface.tests or [{}]:
        try:
            await try_(interface, args)
        except InterfaceError as exc:
            return f"with {json.dumps(args)}: {exc.message}"
    return None


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def embedding_text(interface: Interface) -> str:
    return f"{interface.signature()}\n{interface.description}\n{interface.code}"


async def _merge(
    new: Interface,
    ask: Ask,
    embed: Embed,
    try_: Try,
    report: DesignReport,
    settings: DesignSettings,
) -> None:
    """Adds `new` to the library, merged with a similar interface when the model decides to
    and the merged interface passes the tests of both. A new interface with the name of one
    in the library replaces it (it becomes its next version)."""
    library = report.library
    library[:] = [i for i in library if i.name != new.name]
    if library:
        vectors = await embed([embedding_text(new), *(embedding_text(i) for i in library)])
        scored = sorted(
            ((cosine(vectors[0], v), i) for v, i in zip(vectors[1:], library, strict=True)),
            key=lambda pair: -pair[0],
        )
        similar = [(s, i) for s, i in scored[: settings.top_n] if s >= settings.merge_threshold]
        report.note(
            "similar", interface=new.name, found=[[i.name, round(s, 3)] for s, i in similar]
        )
        if similar:
            answer = parse_json(
                await ask(
                    "merge",
                    "Please check whether the new interface can be merged with an existing "
                    "one of similar function and inputs; use parameters to cover both. Answer "
                    'JSON: {"merge": true|false, "with": name, "reason", "interface": the '
                    "merged interface}.\n###New interface:\n"
                    f"{new.model_dump_json()}\n###Existing interfaces:\n"
                    + "\n".join(i.model_dump_json() for _, i in similar),
                )
            )
            partner = next((i for _, i in similar if i.name == answer.get("with")), None)
            if answer.get("merge") and partner is not None:
                merged = _interface(answer.get("interface"))
                # The merged interface must pass the test cases of both originals.
                merged = merged.model_copy(update={"tests": [*new.tests, *partner.tests]})
                checked = await _tested(merged, ask, try_, report, settings)
                if checked is not None:
                    library.remove(partner)
                    library.append(checked)
                    report.note("merged", names=[partner.name, new.name], into=checked.name)
                    return
                report.note("merge_abandoned", names=[partner.name, new.name])
    library.append(new)
    report.note("accepted", interface=new.name)


async def design(
    requests: Sequence[str],
    source: str,
    library: Sequence[Interface],
    ask: Ask,
    embed: Embed,
    try_: Try,
    settings: DesignSettings = DesignSettings(),
) -> DesignReport:
    """Runs the design-test-optimise loop over the requests, starting from `library`."""
    report = DesignReport(list(library))
    for request in requests:
        answer = parse_json(await ask("design", design_prompt(request, source, report.library)))
        designs = answer.get("interfaces") if isinstance(answer, dict) else None
        if not isinstance(designs, list):
            raise DesignOutputError("the design answer has no `interfaces` list")
        report.note("designed", request=request, interfaces=[d.get("name") for d in designs])
        for value in designs:
            interface = await _tested(_interface(value), ask, try_, report, settings)
            if interface is not None:
                await _merge(interface, ask, embed, try_, report, settings)
    return report

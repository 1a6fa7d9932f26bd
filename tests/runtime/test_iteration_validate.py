"""Save-time checks of sub-flow nodes: ports typed by the sub-flow's interface, references
that do not resolve, recursion inside a document and across apps, named link by link."""

from __future__ import annotations

from typing import Any

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.errors import NotFoundError
from dagwright.registry import Registry
from dagwright.runtime import Flow, Problem, parse_flow, validate
from support import blocks as test_blocks
from support.flows import edge, node


def registry() -> Registry:
    return Registry.from_modules([io_blocks, test_blocks, iteration_blocks])


def doc(nodes: list, edges: list, subflows: dict | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"format": "dagwright.flow", "version": 1, "name": "v"}
    data.update(nodes=nodes, edges=edges)
    if subflows is not None:
        data["subflows"] = subflows
    return data


class Apps:
    """App flows held in memory: the AppResolver the service layer implements on its DB."""

    def __init__(self, docs: dict[str, dict[str, Any]]) -> None:
        self.docs = docs

    def app_flow(self, app: str, version: str) -> Flow:
        if app not in self.docs:
            raise NotFoundError(f"no app {app!r}", code="app_not_found")
        return parse_flow(self.docs[app])


def errors(data: dict[str, Any], apps: Apps | None = None, app: str | None = None) -> list:
    found: list[Problem] = validate(parse_flow(data), registry(), apps, app)
    return [p for p in found if p.severity == "error"]


# text -> upper-cased text
UPPER = {
    "nodes": [
        node("text", "text_input", name="text"),
        node("up", "t_upper"),
        node("y", "output", name="y"),
    ],
    "edges": [edge("text", "up.text"), edge("up", "y")],
}


def test_subflow_ports_are_typed_by_its_interface() -> None:
    ok = doc(
        [
            node("t", "text_input", name="t"),
            node("call", "subflow", subflow="upper", output="y"),
            node("out", "output", name="out"),
        ],
        [edge("t", "call.text"), edge("call", "out")],
        {"upper": UPPER},
    )
    assert errors(ok) == []
    # an int into the sub-flow's text input; the sub-flow's text output into an int port
    wrong = doc(
        [
            node("n", "number_input", name="n"),
            node("c", "t_const", value=1),
            node("call", "subflow", subflow="upper", output="y"),
            node("add", "t_add"),
            node("out", "output", name="out"),
        ],
        [
            edge("c", "call.text"),
            edge("n", "add.b"),
            edge("call", "add.a"),
            edge("add", "out"),
        ],
        {"upper": UPPER},
    )
    found = [(p.code, p.node, p.port) for p in errors(wrong)]
    assert ("type_mismatch", "add", "a") in found
    missing = doc(
        [node("call", "subflow", subflow="upper", output="y"), node("out", "output", name="o")],
        [edge("call", "out")],
        {"upper": UPPER},
    )
    assert [(p.code, p.port) for p in errors(missing)] == [("missing_required_input", "text")]


def test_map_ports() -> None:
    def map_doc(**config: Any) -> dict[str, Any]:
        return doc(
            [
                node("xs", "list_input", name="xs"),
                node("m", "map", subflow="upper", **config),
                node("out", "output", name="out"),
            ],
            [edge("xs", "m.items"), edge("m.output", "out")],
            {"upper": UPPER},
        )

    assert errors(map_doc(item="text", output="y")) == []
    (problem,) = errors(map_doc(item="question"))
    assert problem.code == "invalid_config"
    assert "no input 'question' (inputs: text)" in problem.message
    (problem,) = errors(map_doc(item="text", output="z"))
    assert "no output 'z' (outputs: y)" in problem.message


def test_problems_inside_a_subflow_are_reported_with_its_path() -> None:
    broken = {
        "nodes": [node("text", "text_input", name="text"), node("y", "output", name="y")],
        "edges": [edge("text", "y"), edge("text", "nowhere.x")],
    }
    data = doc(
        [
            node("t", "text_input", name="t"),
            node("call", "subflow", subflow="broken"),
            node("out", "output", name="out"),
        ],
        [edge("t", "call.text"), edge("call", "out")],
        {"broken": broken},
    )
    found = [(p.code, p.node) for p in errors(data)]
    assert ("unknown_node", "broken/nowhere") in found
    assert ("subflow_invalid", "call") in found


def test_unknown_subflow_and_recursion_in_a_document() -> None:
    def caller(target: str) -> dict[str, Any]:
        return {
            "nodes": [
                node("text", "text_input", name="text"),
                node("call", "subflow", subflow=target, output="y"),
                node("y", "output", name="y"),
            ],
            "edges": [edge("text", "call.text"), edge("call", "y")],
        }

    data = doc(
        [
            node("t", "text_input", name="t"),
            node("call", "subflow", subflow="a", output="y"),
            node("nope", "subflow", subflow="missing"),
            node("out", "output", name="out"),
        ],
        [edge("t", "call.text"), edge("call", "out")],
        {"a": caller("b"), "b": caller("a")},
    )
    found = errors(data)
    unknown = next(p for p in found if p.code == "unknown_subflow")
    assert unknown.node == "nope"
    assert "sub-flows: a, b" in unknown.message
    recursion = next(p for p in found if p.code == "subflow_recursion")
    assert "subflow 'a' -> subflow 'b' -> subflow 'a'" in recursion.message


def calling(app: str) -> dict[str, Any]:
    return doc(
        [
            node("text", "text_input", name="text"),
            node("call", "subflow", app=app, output="y"),
            node("y", "output", name="y"),
        ],
        [edge("text", "call.text"), edge("call", "y")],
    )


def test_app_references() -> None:
    upper = doc(UPPER["nodes"], UPPER["edges"])
    (problem,) = errors(calling("upper@3"))
    assert problem.code == "subflow_unavailable"
    apps = Apps({"upper": upper})
    assert errors(calling("upper@3"), apps) == []
    (problem,) = errors(calling("lower@published"), apps)
    assert problem.code == "unknown_app"
    assert "no app 'lower'" in problem.message
    (problem,) = errors(calling("Upper!"), apps)
    assert problem.code == "invalid_config"


def test_recursion_across_apps_is_named_when_saving() -> None:
    # b calls a's published version; saving a version of a that calls b closes the loop.
    apps = Apps({"bb": calling("aa@published")})
    found = errors(calling("bb"), apps, app="aa")
    assert [p.code for p in found] == ["subflow_invalid"]
    assert "app aa@published -> app bb@published -> app aa@published" in found[0].message
    # The same document saved to another app is fine while aa's published version is a leaf.
    apps.docs["aa"] = doc(UPPER["nodes"], UPPER["edges"])
    assert errors(calling("bb"), apps, app="cc") == []

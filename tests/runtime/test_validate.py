"""Validation: one test per problem code, and a flow with many errors reported together."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from dagwright.registry import Registry, block
from dagwright.runtime import FlowInvalidError, Problem, compile_flow, validate
from support.flows import edge, make_flow, node, registry


def problems(nodes: list, edges: list) -> list[Problem]:
    return validate(make_flow(nodes, edges), registry())


def errors(nodes: list, edges: list) -> list[tuple[str, str | None, str | None]]:
    return [(p.code, p.node, p.port) for p in problems(nodes, edges) if p.severity == "error"]


def one(nodes: list, edges: list) -> Problem:
    found = [p for p in problems(nodes, edges) if p.severity == "error"]
    assert len(found) == 1, found
    return found[0]


SRC = node("c", "t_const", value=1)
OUT = node("out", "output", name="result")


def test_valid_flow_has_no_problems() -> None:
    assert problems([SRC, node("a", "t_add"), OUT], [edge("c", "a.a"), edge("a", "out")]) == []


def test_unknown_block() -> None:
    problem = one([SRC, node("x", "no_such_block"), OUT], [edge("c", "out")])
    assert (problem.code, problem.node) == ("unknown_block", "x")
    assert "'no_such_block'" in problem.message


def test_duplicate_node() -> None:
    problem = one([SRC, node("c", "t_const"), OUT], [edge("c", "out")])
    assert (problem.code, problem.node) == ("duplicate_node", "c")


def test_invalid_config_names_node_and_field() -> None:
    problem = one([node("s", "t_sleep", seconds="soon"), OUT], [edge("s", "out")])
    assert (problem.code, problem.node) == ("invalid_config", "s")
    assert "config field 'seconds'" in problem.message
    assert "valid number" in problem.message


def test_unknown_node_in_edge() -> None:
    problem = one([SRC, OUT], [edge("c", "out"), edge("ghost", "out")])
    assert (problem.code, problem.node) == ("unknown_node", "ghost")


def test_unknown_ports() -> None:
    found = errors(
        [SRC, node("a", "t_add"), OUT],
        [edge("c", "a.a"), edge("c.nope", "a.b"), edge("a", "out.wrong"), edge("c", "out")],
    )
    assert ("unknown_port", "c", "nope") in found
    assert ("unknown_port", "out", "wrong") in found
    message = next(
        p.message
        for p in problems([SRC, OUT], [edge("c", "out.wrong")])
        if p.code == "unknown_port"
    )
    assert message == "block 'output' has no input 'wrong' (inputs: value)"


def test_type_mismatch_names_both_types() -> None:
    problem = one(
        [
            node(
                "p",
                "t_pair",
            ),
            node("c", "t_const", value=1),
            node("u", "t_upper"),
            OUT,
        ],
        [edge("c", "p.x"), edge("p.left", "u.text"), edge("u", "out")],
    )
    assert (problem.code, problem.node, problem.port) == ("type_mismatch", "u", "text")
    assert problem.message == "p.left gives int but u.text takes str"


def test_missing_required_input() -> None:
    problem = one([SRC, node("a", "t_add"), OUT], [edge("c", "a.b"), edge("a", "out")])
    assert (problem.code, problem.node, problem.port) == ("missing_required_input", "a", "a")
    assert "(int)" in problem.message


def test_optional_input_may_stay_unwired() -> None:
    assert problems([SRC, node("a", "t_add"), OUT], [edge("c", "a.a"), edge("a", "out")]) == []


def test_cycle_is_named() -> None:
    found = [
        p
        for p in problems(
            [SRC, node("a", "t_add"), node("b", "t_add"), node("d", "t_add"), OUT],
            [
                edge("c", "a.a"),
                edge("a", "b.a"),
                edge("b", "d.a"),
                edge("d", "a.b"),
                edge("d", "out"),
            ],
        )
        if p.code == "cycle"
    ]
    assert len(found) == 1
    assert found[0].message.startswith("cycle: a -> b -> d -> a")


def test_self_loop_is_a_cycle() -> None:
    found = errors(
        [SRC, node("a", "t_add"), OUT], [edge("c", "a.a"), edge("a", "a.b"), edge("a", "out")]
    )
    assert ("cycle", "a", None) in found


def test_branch_labels() -> None:
    nodes = [SRC, node("k", "t_is_positive"), node("a", "t_add"), node("b", "t_add"), OUT]
    found = errors(
        nodes,
        [
            edge("c", "k.x"),
            edge("k", "a.a"),
            edge("k", "b.a", branch="maybe"),
            edge("c", "out", branch="true"),
            edge("a", "out"),
            edge("b", "out"),
        ],
    )
    assert ("missing_branch", "k", "output") in found
    assert ("unknown_branch", "k", "output") in found
    assert ("unexpected_branch", "c", "output") in found


def test_duplicate_edge() -> None:
    problem = one([SRC, OUT], [edge("c", "out"), edge("c", "out")])
    assert problem.code == "duplicate_edge"


def test_duplicate_interface_names() -> None:
    found = errors(
        [
            node("a", "text_input", name="q"),
            node("b", "text_input", name="q"),
            node("o1", "output", name="r"),
            node("o2", "output", name="r"),
        ],
        [edge("a", "o1"), edge("b", "o2")],
    )
    assert ("duplicate_name", "b", None) in found
    assert ("duplicate_name", "o2", None) in found


def test_no_output() -> None:
    problem = one([SRC, node("a", "t_add")], [edge("c", "a.a")])
    assert problem.code == "no_output"


def test_unreachable_output() -> None:
    problem = one(
        [
            node("q", "text_input", name="q"),
            node("u", "t_upper"),
            SRC,
            OUT,
            node("o2", "output", name="other"),
        ],
        [edge("q", "u.text"), edge("u", "o2"), edge("c", "out")],
    )
    assert (problem.code, problem.node) == ("unreachable_output", "out")


def test_unused_node_is_a_warning_only() -> None:
    found = problems([SRC, node("lonely", "t_const"), OUT], [edge("c", "out")])
    assert [(p.code, p.node, p.severity) for p in found] == [("unused_node", "lonely", "warning")]
    compile_flow(make_flow([SRC, node("lonely", "t_const"), OUT], [edge("c", "out")]), registry())


def test_every_problem_reported_at_once() -> None:
    nodes = [
        node("c", "t_const", value=1),
        node("x", "missing_block"),
        node("s", "t_sleep", seconds="x"),
        node("a", "t_add"),
        node("u", "t_upper"),
        node("b", "t_add"),
        node("d", "t_add"),
    ]
    edges = [
        edge("c", "u.text"),  # Any -> str: fine statically
        edge("a", "u.text"),  # int -> str: mismatch
        edge("c", "a.nope"),
        edge("b", "d.a"),
        edge("d", "b.a"),
    ]
    found = {p.code for p in problems(nodes, edges)}
    assert {
        "unknown_block",
        "invalid_config",
        "type_mismatch",
        "unknown_port",
        "missing_required_input",
        "cycle",
        "no_output",
    } <= found
    with pytest.raises(FlowInvalidError) as info:
        compile_flow(make_flow(nodes, edges), registry())
    assert len(info.value.problems) >= 7
    assert info.value.to_dict()["code"] == "flow_invalid"


class Names(BaseModel):
    names: list[str] = []


def broken_ports(config: Names) -> list[str]:
    raise KeyError("nope")


@block("fragile", category="data_process", description="Fragile.", dynamic_ports=broken_ports)
async def fragile(config: Names, **values: int) -> int:
    """Breaks when asked for its ports."""
    return 0


def test_broken_port_function_is_an_invalid_config_not_a_crash() -> None:
    reg = Registry([*registry(), fragile.__dagwright_block__])
    found = validate(make_flow([node("f", "fragile"), OUT], [edge("f", "out")]), reg)
    assert [(p.code, p.node) for p in found] == [("invalid_config", "f")]
    assert "cannot derive its ports or branches from this config: KeyError" in found[0].message

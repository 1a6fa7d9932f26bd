"""The flow file format: strict reading, clear errors, nothing lost on a round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagwright.errors import FlowFormatError
from dagwright.runtime import load_flow, loads_flow, parse_flow
from support.flows import edge, flow_doc, node

EXAMPLES = Path(__file__).resolve().parents[2] / "flows" / "examples"


def test_round_trip_keeps_every_edge_including_parallel_ones() -> None:
    doc = flow_doc(
        [
            node("a", "t_const", value=1),
            {**node("b", "t_add"), "position": {"x": 10, "y": 20}},
            node("out", "output", name="r"),
        ],
        # two edges between the same pair of nodes, and two into one port (a merge)
        [edge("a", "b.a"), edge("a", "b.b"), edge("b", "out"), edge("a", "out")],
    )
    flow = parse_flow(doc)
    again = loads_flow(flow.to_json())
    assert again == flow
    assert len(again.edges) == 4
    assert again.nodes[1].position is not None
    assert again.nodes[1].position.x == 10


def test_malformed_json_names_line_and_column() -> None:
    text = '{\n  "format": "dagwright.flow",\n  "version": 1,\n  "nodes": [,]\n}'
    with pytest.raises(FlowFormatError, match=r"my.json: malformed JSON at line 4, column 13"):
        loads_flow(text, source="my.json")


def test_unknown_version_is_refused_clearly() -> None:
    with pytest.raises(
        FlowFormatError, match="flow format version 7 is not supported; this dagwright reads 1"
    ):
        parse_flow({"format": "dagwright.flow", "version": 7, "nodes": []})


def test_not_a_flow() -> None:
    with pytest.raises(FlowFormatError, match=r"'format' must be 'dagwright\.flow', not None"):
        parse_flow({"nodes": []})
    with pytest.raises(FlowFormatError, match="a flow is a JSON object, not list"):
        parse_flow([])


def test_shape_errors_name_their_location() -> None:
    doc = flow_doc(
        [{"id": "a b", "block": "x"}, {"id": "c"}],
        [{"source": {"node": "a"}, "target": {}, "colour": "red"}],
    )
    with pytest.raises(FlowFormatError) as info:
        parse_flow(doc)
    message = info.value.message
    assert "nodes[0].id: String should match pattern" in message
    assert "nodes[1].block: Field required" in message
    assert "edges[0].target.node: Field required" in message
    assert "edges[0].colour: Extra inputs are not permitted" in message


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(FlowFormatError, match="cannot read"):
        load_flow(tmp_path / "missing.json")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(FlowFormatError, match="not UTF-8 text"):
        load_flow(binary)


def test_examples_are_current_format() -> None:
    files = sorted(EXAMPLES.glob("*.json"))
    assert files, "flows/examples must hold example flows"
    for path in files:
        flow = load_flow(path)
        assert json.loads(flow.to_json())["version"] == 1

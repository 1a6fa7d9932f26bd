"""Regular-expression denial of service against a real server (issue 13, finding 5).

User patterns (regex_extract, regex_find_all, compare's `regex`, json_path's `=~`) run on RE2:
linear in the text, each search bounded by `len(text) * pattern positions`, so a catastrophic
pattern on a hostile input answers at once while the health probe (support.probe) checks that
nobody else waited. What RE2 cannot run (backreferences, lookaround...) is refused when the
flow is checked, naming the node, the field and the construct.

Before the fix, `(a+)+$` on 'aaaa…!' in regex_extract held the GIL for seconds: a run with a
1 s node timeout answered after 6.5 s, the server frozen for 6.2 s of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from support.probe import timed
from support.server import Api, ServerProcess, edge, flow, node

HOSTILE = "a" * 100_000 + "!"  # for patterns that backtrack exponentially in Python's re


def regex_flow(block: str, **config: Any) -> dict[str, Any]:
    """A text input `text` -> the regex node `re` -> output `out`."""
    return flow(
        [
            node("text", "text_input", name="text"),
            node("re", block, **config),
            node("out", "output", name="out"),
        ],
        [edge("text", "re.text"), edge("re", "out")],
        name="redos",
    )


def compare_flow(operand: str | None) -> dict[str, Any]:
    """compare op regex; without an operand in the config, the `pattern` input is wired to it."""
    nodes = [node("text", "text_input", name="text")]
    edges = [edge("text", "cmp.value")]
    if operand is None:
        nodes.append(node("pattern", "text_input", name="pattern"))
        edges.append(edge("pattern", "cmp.operand"))
        nodes.append(node("cmp", "compare", op="regex"))
    else:
        nodes.append(node("cmp", "compare", op="regex", operand=operand))
    nodes += [node("yes", "output", name="yes"), node("no", "output", name="no")]
    edges += [
        {**edge("cmp", "yes"), "branch": "true"},
        {**edge("cmp", "no"), "branch": "false"},
    ]
    return flow(nodes, edges, name="redos-compare")


def json_path_flow(path: str) -> dict[str, Any]:
    return flow(
        [
            node("data", "json_input", name="data"),
            node("jp", "json_path", path=path),
            node("out", "output", name="out"),
        ],
        [edge("data", "jp.data"), edge("jp", "out")],
        name="redos-json-path",
    )


def debug_run(
    server: ServerProcess, api: Api, doc: dict[str, Any], inputs: dict[str, Any]
) -> tuple[dict[str, Any], float]:
    response, elapsed = timed(
        server.base_url,
        lambda: api.http.post(
            "/api/v1/runs/debug", json={"flow": doc, "inputs": inputs, "stream": False}
        ),
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body, elapsed


def validate(server: ServerProcess, api: Api, doc: dict[str, Any]) -> dict[str, Any]:
    response, _ = timed(
        server.base_url, lambda: api.http.post("/api/v1/validate", json={"flow": doc})
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# -- catastrophic patterns answer at once --------------------------------------------------

CATASTROPHIC = [r"(a+)+$", r"(a|aa)+$", r"^(a|a?)+$", r"(\w+\s?)+$", r"(.*a){20}$", r"^(a+)+b"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_regex_extract_with_a_catastrophic_pattern(
    server_process: ServerProcess, api: Api, pattern: str
) -> None:
    doc = regex_flow("regex_extract", pattern=pattern, group=1)
    body, elapsed = debug_run(server_process, api, doc, {"text": HOSTILE})
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"out": None}  # no match, found in linear time
    assert elapsed < 2.0


def test_regex_find_all_with_a_catastrophic_pattern(
    server_process: ServerProcess, api: Api
) -> None:
    doc = regex_flow("regex_find_all", pattern=r"(a|aa)+b")
    body, _ = debug_run(server_process, api, doc, {"text": HOSTILE * 5})
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"out": []}


def test_nested_wildcards_on_a_long_match(server_process: ServerProcess, api: Api) -> None:
    # `(.*a){20}` matches all of a long text: the whole match is found by RE2's DFA alone, and
    # groups, which need its slower NFA, are captured in a worker thread (RE2 releases the GIL).
    text = "a" * 1_000_000
    for group in (0, 1):
        doc = flow(
            [
                node("text", "text_input", name="text"),
                node("re", "regex_extract", pattern=r"(.*a){20}", group=group),
                node("size", "template", template="{{ m|length }}"),
                node("out", "output", name="out"),
            ],
            [edge("text", "re.text"), edge("re", "size.m"), edge("size", "out")],
        )
        body, _ = debug_run(server_process, api, doc, {"text": text})
        assert body["status"] == "succeeded", body
        assert body["outputs"] == {"out": "1000000" if group == 0 else "1"}


def test_compare_with_a_catastrophic_pattern(server_process: ServerProcess, api: Api) -> None:
    # compare runs on the server's event loop: a backtracking engine froze everything.
    body, elapsed = debug_run(server_process, api, compare_flow(r"(a+)+$"), {"text": HOSTILE})
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"no": HOSTILE}
    assert elapsed < 2.0


def test_compare_with_a_pattern_from_the_caller(server_process: ServerProcess, api: Api) -> None:
    # The operand port: the caller chooses the pattern as well as the text.
    inputs = {"text": HOSTILE, "pattern": r"(a|aa)+$"}
    body, _ = debug_run(server_process, api, compare_flow(None), inputs)
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"no": HOSTILE}

    # RE2's slow path (its DFA giving up) is bounded on the event loop: a long text for a
    # pattern of many positions is refused before the search.
    inputs = {"text": "ab " * 300_000, "pattern": r"a.{30}c"}
    body, _ = debug_run(server_process, api, compare_flow(None), inputs)
    assert body["status"] == "failed", body
    error = body["error"]
    assert (error["code"], error["node"]) == ("regex_limit", "cmp")
    assert (
        "a text of 900,000 characters is too long for this pattern (32 positions"
        in (error["message"])
    )

    inputs = {"text": "abc", "pattern": r"(a)\1"}
    body, _ = debug_run(server_process, api, compare_flow(None), inputs)
    error = body["error"]
    assert (error["code"], error["node"]) == ("regex_unsupported", "cmp")
    assert r"operand '(a)\\1' uses a backreference" in error["message"]


def test_json_path_regex_filter(server_process: ServerProcess, api: Api) -> None:
    # jsonpath_ng's own `=~` runs Python's re, on the event loop (json_path is inline).
    doc = json_path_flow("$.items[?(@.name =~ '(a+)+$')].id")
    data = {"items": [{"id": 1, "name": HOSTILE}, {"id": 2, "name": "aaa"}]}
    body, elapsed = debug_run(server_process, api, doc, {"data": data})
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"out": [2]}
    assert elapsed < 2.0


def test_find_all_of_an_empty_pattern_is_bounded(server_process: ServerProcess, api: Api) -> None:
    # A pattern matching '' matches at every position: the matches are capped.
    doc = regex_flow("regex_find_all", pattern=r"(?:)")
    body, _ = debug_run(server_process, api, doc, {"text": "x" * 1_000_000})
    assert body["status"] == "failed", body
    error = body["error"]
    assert (error["code"], error["node"]) == ("regex_limit", "re")
    assert "the pattern matches more than 100,000 times in the text" in error["message"]


# -- what RE2 cannot run is refused when the flow is checked -------------------------------

UNSUPPORTED = [
    (r"(a)\1", "a backreference"),
    (r"(?P<x>a)(?P=x)", "a backreference"),
    (r"(?<=a)b", "a lookbehind (?<=...)"),
    (r"(?<!a)b", "a negative lookbehind (?<!...)"),
    (r"a(?=b)", "a lookahead (?=...)"),
    (r"a(?!b)", "a negative lookahead (?!...)"),
    (r"(a)?(?(1)b|c)", "a conditional group"),
    (r"(?>a+)b", "an atomic group (?>...)"),
    (r"a++b", "a possessive quantifier"),
]


@pytest.mark.parametrize(("pattern", "construct"), UNSUPPORTED)
def test_unsupported_constructs_are_refused_by_name(
    server_process: ServerProcess, api: Api, pattern: str, construct: str
) -> None:
    body = validate(server_process, api, regex_flow("regex_extract", pattern=pattern))
    assert body["ok"] is False
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert (problem["code"], problem["node"]) == ("invalid_config", "re")
    message = problem["message"]
    assert "config field 'pattern'" in message
    assert f"pattern uses {construct}" in message
    assert "RE2 (the linear-time engine user patterns run on) does not support" in message


def test_saving_refuses_a_lookbehind_in_compare(server_process: ServerProcess, api: Api) -> None:
    api.create_app("redos-save")
    doc = compare_flow(r"(?<=\$)\d+")
    response, _ = timed(
        server_process.base_url,
        lambda: api.http.post("/api/v1/apps/redos-save/versions", json={"flow": doc}),
    )
    assert response.status_code == 422, response.text
    [problem] = [p for p in response.json()["error"]["problems"] if p["severity"] == "error"]
    assert (problem["code"], problem["node"]) == ("invalid_config", "cmp")
    assert r"operand '(?<=\\$)\\d+' uses a lookbehind (?<=...)" in problem["message"]


def test_json_path_refuses_unsupported_patterns_and_sub(
    server_process: ServerProcess, api: Api
) -> None:
    body = validate(server_process, api, json_path_flow("$.items[?(@.name =~ '(a)\\\\1')]"))
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert problem["node"] == "jp"
    assert "the `=~` pattern" in problem["message"]
    assert "uses a backreference" in problem["message"]

    body = validate(server_process, api, json_path_flow("$.s.`sub(/(a+)+$/, b)`"))
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert problem["node"] == "jp"
    assert "path uses `sub()`" in problem["message"]


def test_huge_repetition_counts_are_refused(server_process: ServerProcess, api: Api) -> None:
    body = validate(server_process, api, regex_flow("regex_extract", pattern=r"a{1001}"))
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert "a repetition count of 1,001 (RE2 allows at most 1,000)" in problem["message"]
    body = validate(
        server_process, api, regex_flow("regex_extract", pattern=r"((a{100}){100}){100}")
    )
    [problem] = [p for p in body["problems"] if p["severity"] == "error"]
    assert "counted repetitions nested too deeply for RE2" in problem["message"]


def test_python_syntax_still_works(server_process: ServerProcess, api: Api) -> None:
    # Unicode classes, named groups, flags and `$` before a final newline, as in Python.
    doc = regex_flow(
        "regex_extract", pattern=r"^total: (?P<n>\d+) (\w+)$", group="n", flags=["MULTILINE"]
    )
    body, _ = debug_run(server_process, api, doc, {"text": "x\ntotal: ٤٢ café\n"})
    assert body["status"] == "succeeded", body
    assert body["outputs"] == {"out": "٤٢"}
    doc = regex_flow("regex_find_all", pattern=r"\d+$")
    body, _ = debug_run(server_process, api, doc, {"text": "1 2 3\n"})
    assert body["outputs"] == {"out": ["3"]}

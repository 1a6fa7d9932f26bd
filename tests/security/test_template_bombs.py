"""Template bombs against a real server (issue 13, finding 3).

Each case sends a hostile template to a `dagwright serve` process, the way an editor (or
anyone with the admin API) would: validating or saving a flow, or a debug run of it, while
the health probe (support.probe) checks that nobody else waited 1 s meanwhile. The server
must refuse: a 4xx naming the node, the field and the limit when the flow is checked, or a
failed run with the code `template_limit` and the limit in its message.

Before the fix, validating ``{{ 10 ** 100000000 }}`` ran for minutes holding the GIL (Jinja
folded the constant while compiling), ``{{ 'a' * 3000000000 }}`` allocated 3 GB, and a loop
with no output ran without end.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from support.probe import timed
from support.server import Api, ServerProcess, edge, flow, node

# What "quick" means for a refusal, generous for a loaded CI machine: the bombs used to take
# minutes. The health probe's own limit (1 s) is the strict check.


def template_flow(template: str, inputs: dict[str, str] | None = None) -> dict[str, Any]:
    """Inputs (name -> input block) -> a template node `t` -> output `out`."""
    inputs = inputs or {}
    nodes = [node(name, block, name=name) for name, block in inputs.items()]
    nodes += [node("t", "template", template=template), node("out", "output", name="out")]
    edges = [edge(name, f"t.{name}") for name in inputs] + [edge("t", "out")]
    return flow(nodes, edges, name="bomb")


def chat_flow(prompt: str) -> dict[str, Any]:
    """A chat node whose prompt is the bomb: prompts render on the server's event loop."""
    return flow(
        [
            node("q", "text_input", name="q"),
            node("ask", "chat", prompt=prompt + "{{ q }}"),
            node("out", "output", name="answer"),
        ],
        [edge("q", "ask.q"), edge("ask", "out")],
        name="chat-bomb",
    )


def validate(server: ServerProcess, api: Api, doc: dict[str, Any]) -> dict[str, Any]:
    response, _ = timed(
        server.base_url, lambda: api.http.post("/api/v1/validate", json={"flow": doc})
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def debug_run(
    server: ServerProcess, api: Api, doc: dict[str, Any], inputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    response, _ = timed(
        server.base_url,
        lambda: api.http.post(
            "/api/v1/runs/debug", json={"flow": doc, "inputs": inputs or {}, "stream": False}
        ),
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def refused_run(body: dict[str, Any], limit: str | tuple[str, ...], node_id: str = "t") -> str:
    """The run failed at the node with template_limit naming one of the limits; the message."""
    limits = (limit,) if isinstance(limit, str) else limit
    assert body["status"] == "failed", body
    error = body["error"]
    assert error["code"] == "template_limit", error
    assert error["node"] == node_id
    message: str = error["message"]
    assert "refused by the template limits" in message
    assert any(f"(limit {name} = " in message for name in limits), message
    return message


def config_problem(body: dict[str, Any], node_id: str, field: str, limit: str) -> str:
    """The validation problem of the node's field naming the limit; its message."""
    assert body["ok"] is False, body
    problems = [p for p in body["problems"] if p["severity"] == "error"]
    assert [(p["code"], p["node"]) for p in problems] == [("invalid_config", node_id)], problems
    message: str = problems[0]["message"]
    assert f"config field {field!r}" in message
    assert "refused by the template limits" in message
    assert f"(limit {limit} = " in message
    return message


# -- validating: compile time is bounded, nothing is evaluated ------------------------------


def test_validating_a_huge_power_takes_milliseconds(
    server_process: ServerProcess, api: Api
) -> None:
    # Before: Jinja folded the constant at compile time, for minutes, while merely validating.
    doc = template_flow("{{ 10 ** 100000000 }}")
    response, elapsed = timed(
        server_process.base_url, lambda: api.http.post("/api/v1/validate", json={"flow": doc})
    )
    assert response.status_code == 200, response.text
    assert response.json()["ok"] is True  # valid syntax: the render refuses it (below)
    assert elapsed < 1.0, f"validating took {elapsed:.2f} s"
    message = refused_run(debug_run(server_process, api, doc), "int_bits")
    assert "`**` would build an integer of about 300,000,001 bits" in message


def test_saving_refuses_a_template_too_long(server_process: ServerProcess, api: Api) -> None:
    slug = f"bomb-{uuid.uuid4().hex[:8]}"
    api.create_app(slug)
    doc = template_flow("x" * 150_000)
    response, _ = timed(
        server_process.base_url,
        lambda: api.http.post(f"/api/v1/apps/{slug}/versions", json={"flow": doc}),
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "flow_invalid"
    [problem] = [p for p in error["problems"] if p["severity"] == "error"]
    assert (problem["code"], problem["node"]) == ("invalid_config", "t")
    assert "config field 'template'" in problem["message"]
    assert (
        "the template is 150,000 characters long (limit source_chars = 100,000)"
        in (problem["message"])
    )


def test_validation_refuses_too_many_tokens(server_process: ServerProcess, api: Api) -> None:
    body = validate(server_process, api, template_flow("{{ a }}" * 4_000))
    message = config_problem(body, "t", "template", "tokens")
    assert "more than 2,000 tags, names and operators" in message


@pytest.mark.parametrize(
    "template",
    [
        "{{ " + "(" * 500 + "1" + ")" * 500 + " }}",  # the parser's recursion
        "{{ " + "-" * 1_500 + "1 }}",
        "{{ " + "not " * 900 + "x }}",
        "{% if a %}" * 200 + "{% endif %}" * 200,
    ],
    ids=["parentheses", "unary-minus", "not", "if-blocks"],
)
def test_validation_refuses_deep_nesting(
    server_process: ServerProcess, api: Api, template: str
) -> None:
    body = validate(server_process, api, template_flow(template, {"a": "text_input"}))
    assert body["ok"] is False
    problems = [p for p in body["problems"] if p["code"] == "invalid_config"]
    assert [p["node"] for p in problems] == ["t"]
    message = problems[0]["message"]
    assert "refused by the template limits" in message
    assert "nests" in message


def test_validation_refuses_nested_loops_past_python_block_limit(
    server_process: ServerProcess, api: Api
) -> None:
    template = "{% for x in a %}" * 25 + "{% endfor %}" * 25
    body = validate(server_process, api, template_flow(template, {"a": "list_input"}))
    message = config_problem(body, "t", "template", "depth")
    assert "nests too deeply to compile" in message


def test_a_bad_template_in_a_chat_prompt_names_the_field(
    server_process: ServerProcess, api: Api
) -> None:
    body = validate(server_process, api, chat_flow("{{ a }}" * 3_000))
    message = config_problem(body, "ask", "prompt", "tokens")
    assert "prompt: refused by the template limits" in message


def test_the_largest_template_allowed_compiles_quickly(
    server_process: ServerProcess, api: Api
) -> None:
    # Just under the token limit, and debug runs compile flows on the event loop.
    template = "{{ a|upper }}" * 390
    body = debug_run(server_process, api, template_flow(template, {"a": "text_input"}), {"a": "x"})
    assert body["status"] == "succeeded", body
    assert body["outputs"]["out"] == "X" * 390


# -- rendering: every operator, filter and call checks before it builds -----------------------

RENDER_BOMBS = [
    # big and nested powers
    ("{{ 9 ** (9 ** 9) }}", "int_bits", "`**` would build an integer"),
    ("{{ (2 ** 64) ** (2 ** 64) }}", "int_bits", "`**` would build an integer"),
    ("{{ 10 ** 2500 * 10 ** 2500 }}", "int_bits", "`*` would build an integer"),
    # repeated texts and lists
    ("{{ 'a' * 3000000000 }}", "output_chars", "`*` on a text would make a text of 3,0"),
    ("{{ [0] * 3000000000 }}", "items", "`*` on a list would make 3,000,000,000 items"),
    ("{{ ('a' * 3000000) + ('b' * 3000000) }}", "output_chars", "`+` on texts"),
    ("{% set s = 'x' * 1000000 %}{{ s ~ s ~ s ~ s ~ s }}", "output_chars", "`~` would make"),
    # huge ranges, sorts and joins
    ("{{ range(10 ** 9)|list }}", "items", "range() would make 1,000,000,000 items"),
    ("{{ range(10000000)|list|sort }}", "items", "range() would make 10,000,000 items"),
    (
        "{% set s = 'x' * 1000000 %}{{ ([s] * 1000)|join }}",
        "output_chars",
        "the filter 'join' would make a text",
    ),
    # the same long text many times in one cheap list: printing it is what costs
    ("{% set s = 'x' * 1000000 %}{{ [s] * 100000 }}", "output_chars", "printing a value"),
    ("{% set s = 'x' * 1000000 %}{{ ([s] * 1000)|tojson }}", "output_chars", "'tojson'"),
    ("{% set s = 'x' * 1000000 %}{{ ([s] * 1000)|string }}", "output_chars", "'string'"),
    # format widths
    ("{{ '%999999999d'|format(1) }}", "output_chars", "a `%` format width or precision"),
    ("{{ '%999999999d' % 1 }}", "output_chars", "a `%` format width or precision"),
    ("{{ '%*d' % (999999999, 1) }}", "output_chars", "a `%` format width or precision"),
    ("{{ '{:>999999999}'.format(1) }}", "output_chars", "a format width or precision"),
    ("{{ '{:{w}}'.format(1, w=999999999) }}", "output_chars", "a format width or precision"),
    ("{{ 'x'|center(999999999) }}", "output_chars", "the filter 'center'"),
    ("{{ 'x'.ljust(999999999) }}", "output_chars", "the text method 'ljust'"),
    ("{{ (1).to_bytes(999999999, 'big') }}", "output_chars", "int.to_bytes"),
    ("{{ ('a' * 10000).replace('a', 'b' * 10000) }}", "output_chars", "method 'replace'"),
    ("{{ lipsum(1000000) }}", "output_chars", "lipsum()"),
    # recursion
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "call_depth", "calls nest more"),
    (
        "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(0) }}",
        "call_depth",
        "a macro calling itself",
    ),
    # output and work
    ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output_chars", "the output"),
    # A macro's output over the size limit in a twentieth of the iterations (5,000 texts
    # of 1,000 characters: 5 MB), so the size check refuses it on any machine: 100,000
    # iterations took 0.257 s of CPU here, past the CPU limit first.
    (
        "{% macro m() %}{% for i in range(5000) %}{{ 'x' * 1000 }}{% endfor %}{% endmacro %}"
        "{{ m()|length }}",
        ("output_chars", "built_chars"),
        "",
    ),
    (
        "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        ("steps", "cpu_seconds", "output_chars"),
        "",
    ),
    # a loop with no output at all is bounded too
    (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        ("steps", "cpu_seconds"),
        "",
    ),
    (
        "{% for i in range(100000) %}{% set x = ('y' * 100000)|upper %}{% endfor %}",
        ("built_chars", "cpu_seconds", "steps"),
        "",
    ),
    (
        "{{ ([[1]] * 100000)|sum(start=[])|length }}",
        ("cpu_seconds", "steps", "items"),
        "",
    ),
]


@pytest.mark.parametrize(
    ("template", "limit", "says"), RENDER_BOMBS, ids=[f"bomb{i}" for i in range(len(RENDER_BOMBS))]
)
def test_render_bombs_fail_the_node(
    server_process: ServerProcess,
    api: Api,
    template: str,
    limit: str | tuple[str, ...],
    says: str,
) -> None:
    doc = template_flow(template)
    assert validate(server_process, api, doc)["ok"] is True
    message = refused_run(debug_run(server_process, api, doc), limit)
    assert says in message


def test_bombs_fed_by_the_caller_fail_the_node(server_process: ServerProcess, api: Api) -> None:
    """The values come from the app's caller, not the template."""
    doc = template_flow("{{ text * n }}", {"text": "text_input", "n": "json_input"})
    body = debug_run(server_process, api, doc, {"text": "abc", "n": 10**9})
    assert "`*` on a text would make a text of 3,000,000,000" in refused_run(body, "output_chars")

    doc = template_flow("{{ n ** n }}", {"n": "json_input"})
    body = debug_run(server_process, api, doc, {"n": 10**6})
    refused_run(body, "int_bits")

    doc = template_flow("{{ items|sort }}", {"items": "list_input"})
    body = debug_run(server_process, api, doc, {"items": list(range(150_000))})
    assert "the filter 'sort' would make 150,000 items" in refused_run(body, "items")


def test_a_bomb_in_a_chat_prompt_fails_before_the_model(
    server_process: ServerProcess, api: Api
) -> None:
    # Prompts render on the server's event loop: the CPU budget keeps the loop free.
    for bomb, limit in (
        ("{{ 10 ** 100000000 }}", ("int_bits",)),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            ("steps", "cpu_seconds"),
        ),
    ):
        body = debug_run(server_process, api, chat_flow(bomb), {"q": "hi"})
        message = refused_run(body, limit, node_id="ask")
        assert "prompt: refused by the template limits" in message


def test_urlize_on_a_long_word_stays_fast(server_process: ServerProcess, api: Api) -> None:
    # Jinja's urlize takes time quadratic in a word's length (20,000 characters: 18 s holding
    # the GIL); words over 1,000 characters are escaped, not linked.
    doc = template_flow("{{ text|urlize }}", {"text": "text_input"})
    word = ")" * 20_000 + "a)"
    body = debug_run(server_process, api, doc, {"text": f"see http://example.com {word}"})
    assert body["status"] == "succeeded", body
    out = body["outputs"]["out"]
    assert out.startswith('see <a href="http://example.com" rel="noopener">http://example.com</a>')
    assert out.endswith(word)


def test_the_sandbox_still_refuses_python_internals(
    server_process: ServerProcess, api: Api
) -> None:
    for template in (
        "{{ ''.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ (1).__class__.__subclasses__() }}",
        "{{ lipsum.__globals__ }}",
    ):
        body = debug_run(server_process, api, template_flow(template))
        assert body["status"] == "failed", body
        assert body["error"]["node"] == "t"
        assert "refused by the sandbox" in body["error"]["message"]


def test_ordinary_templates_still_render(server_process: ServerProcess, api: Api) -> None:
    template = (
        "{% for row in rows|sort(attribute='n') %}{{ loop.index }}. {{ row.name|title }}"
        " ({{ '%.1f'|format(row.n / 2) }}){{ ', ' if not loop.last }}{% endfor %}"
        " | {{ rows|map(attribute='name')|join('+') }} | {{ 2 ** 10 }} | {{ '=' * 3 }}"
    )
    doc = template_flow(template, {"rows": "list_input"})
    rows = [{"name": "bo", "n": 3}, {"name": "al", "n": 1}]
    body = debug_run(server_process, api, doc, {"rows": rows})
    assert body["status"] == "succeeded", body
    assert body["outputs"]["out"] == "1. Al (0.5), 2. Bo (1.5) | bo+al | 1024 | ==="

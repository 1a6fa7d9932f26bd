"""The data_process blocks: called directly as functions and run inside real flows."""

from __future__ import annotations

import asyncio
import math
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from dagwright import safe_regex, templating
from dagwright.blocks import data_process as dp
from dagwright.errors import BlockConfigError, DagwrightError
from dagwright.registry import Registry
from dagwright.runtime import Executor, Flow, RunResult, compile_flow, validate
from dagwright.safe_regex import RegexError, compile_user_regex
from dagwright.templating import TemplateLimitError, check_template, compile_template
from support.flows import flow_from_tuples

# -- helpers -------------------------------------------------------------------------------


async def run_flow(flow: Flow, inputs: dict[str, Any]) -> RunResult:
    plan = compile_flow(flow, Registry.default())
    return await Executor().run(plan, inputs)


def config_error(model: type[BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return str(info.value)


# -- template ------------------------------------------------------------------------------


def test_template_renders_variables() -> None:
    config = dp.TemplateConfig(template="Answer {{ question }} in {{ lang }}.")
    assert dp.template(config, question="why?", lang="French") == "Answer why? in French."


def test_template_variables_become_sorted_ports() -> None:
    spec = Registry.default().get("template")
    config = dp.TemplateConfig(
        template="{{ question }} {% for row in rows %}{{ row }}{{ loop.index }}{% endfor %}"
        "{% set n = 3 %}{{ n }}{% for i in range(2) %}{{ i }}{% endfor %}"
    )
    ports = spec.input_ports(config)
    assert list(ports) == ["question", "rows"]
    assert all(port.required for port in ports.values())


def test_template_keeps_trailing_newline_and_has_tojson() -> None:
    config = dp.TemplateConfig(template="data: {{ value | tojson }}\n")
    assert dp.template(config, value={"a": [1, "x"]}) == 'data: {"a": [1, "x"]}\n'


def test_template_that_does_not_parse_is_a_config_error() -> None:
    message = config_error(dp.TemplateConfig, {"template": "line one\n{% for x in %}"})
    assert "template does not parse: line 2: " in message


def test_template_unknown_filter_is_a_config_error() -> None:
    message = config_error(dp.TemplateConfig, {"template": "{{ x | no_such_filter }}"})
    assert "template does not parse: line 1: No filter named 'no_such_filter'" in message


def test_template_variable_named_config_is_refused() -> None:
    spec = Registry.default().get("template")
    with pytest.raises(BlockConfigError, match="port name 'config' is reserved by the block"):
        spec.input_ports(dp.TemplateConfig(template="{{ config }}"))


def test_template_sandbox_refuses_dunder_access() -> None:
    config = dp.TemplateConfig(template="{{ ''.__class__.__mro__ }}")
    with pytest.raises(ValueError, match="refused by the sandbox: access to attribute '__class__'"):
        dp.template(config)


def test_template_sandbox_refuses_mutating_an_input() -> None:
    config = dp.TemplateConfig(template="{{ items.append(4) }}")
    items = [1, 2, 3]
    with pytest.raises(ValueError, match="refused by the sandbox"):
        dp.template(config, items=items)
    assert items == [1, 2, 3]


def test_template_undefined_attribute_is_an_error() -> None:
    config = dp.TemplateConfig(template="Hello {{ user.name }}")
    with pytest.raises(ValueError, match="template: undefined value: 'dict object' has no"):
        dp.template(config, user={})


def test_template_other_render_errors_become_value_errors() -> None:
    config = dp.TemplateConfig(template="{{ a / b }}")
    with pytest.raises(ValueError, match="template failed to render: ZeroDivisionError"):
        dp.template(config, a=1, b=0)


def test_template_is_compiled_once() -> None:
    text = "cached {{ x }} template"
    config = dp.TemplateConfig(template=text)
    before = compile_template.cache_info()
    assert dp.template(config, x=1) == "cached 1 template"
    assert dp.template(config, x=2) == "cached 2 template"
    after = compile_template.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 2


async def test_template_in_a_flow() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "question"}),
            ("lang", "text_input", {"name": "lang"}),
            ("t", "template", {"template": "Answer {{ question }} in {{ lang }}."}),
            ("out", "output", {"name": "prompt"}),
        ],
        [("q.output", "t.question"), ("lang.output", "t.lang"), ("t.output", "out.value")],
    )
    result = await run_flow(flow, {"question": "who is Tom?", "lang": "German"})
    assert result.status == "succeeded"
    assert result.outputs == {"prompt": "Answer who is Tom? in German."}


def test_template_parse_error_reported_by_validate() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "q"}),
            ("t", "template", {"template": "{{ q "}),
            ("out", "output", {"name": "o"}),
        ],
        [("q.output", "t.q"), ("t.output", "out.value")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node) for p in problems] == [("invalid_config", "t")]
    assert "template does not parse: line 1: unexpected end of template" in problems[0].message


def test_template_unwired_variable_reported_by_validate() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "q"}),
            ("t", "template", {"template": "{{ q }} {{ other }}"}),
            ("out", "output", {"name": "o"}),
        ],
        [("q.output", "t.q"), ("t.output", "out.value")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node, p.port) for p in problems] == [
        ("missing_required_input", "t", "other")
    ]


async def test_template_sandbox_escape_fails_the_run() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "q"}),
            ("t", "template", {"template": "{{ q }}{{ cycler.__init__.__globals__ }}"}),
            ("out", "output", {"name": "o"}),
        ],
        [("q.output", "t.q"), ("t.output", "out.value")],
    )
    result = await run_flow(flow, {"q": "x"})
    assert result.status == "failed"
    assert result.outputs == {}
    assert result.error is not None
    assert result.error.node == "t"
    assert result.error.error_type == "ValueError"
    assert "refused by the sandbox: access to attribute '__init__'" in result.error.message


# -- template limits (dagwright.templating; issue 13, finding 3) ------------------------------


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set some of the template limits for one test (the sandbox reads them when it checks)."""

    def set_limits(**values: Any) -> None:
        monkeypatch.setattr(templating, "LIMITS", replace(templating.LIMITS, **values))

    return set_limits


def refused(template: str, limit: str, **variables: Any) -> str:
    """Render: a TemplateLimitError naming `limit`; its message."""
    with pytest.raises(TemplateLimitError) as info:
        templating.render(template, variables)
    error = info.value
    assert error.code == "template_limit"
    assert error.limit == limit, error.message
    assert error.message.startswith("template: refused by the template limits: ")
    assert f"(limit {limit} = {getattr(templating.LIMITS, limit):,})" in error.message
    assert error.to_dict()["limit"] == limit
    return error.message


def test_template_limit_error_is_typed_and_a_value_error() -> None:
    # A ValueError, so that config validators turn it into a problem of the node's field.
    assert issubclass(TemplateLimitError, DagwrightError)
    assert issubclass(TemplateLimitError, ValueError)


def test_validating_a_huge_power_does_not_evaluate_it() -> None:
    # Jinja folds constants at compile time: this took minutes, during *validation*.
    started = time.perf_counter()
    dp.TemplateConfig(template="{{ 10 ** 100000000 }} {{ 'a' * 3000000000 }}")
    assert time.perf_counter() - started < 0.5
    # Operators are intercepted (never folded), and outputs are not evaluated while compiling.
    code = templating.SANDBOX.compile("{{ 2 ** 3 }}{{ 'x'|center(9) }}", raw=True)
    assert "environment.call_binop(context, '**', 2, 3)" in code
    assert "'x'" in code
    assert "  x  " not in code


def test_template_powers_and_products_are_bounded() -> None:
    assert refused("{{ 10 ** 100000000 }}", "int_bits").endswith(
        "`**` would build an integer of about 300,000,001 bits (limit int_bits = 10,000)"
    )
    refused("{{ 9 ** (9 ** 9) }}", "int_bits")
    refused("{{ n ** n }}", "int_bits", n=10**6)
    refused("{{ 10 ** 2500 * 10 ** 2500 }}", "int_bits")
    assert templating.render("{{ 2 ** 64 }} {{ 2 ** -1 }} {{ (-1) ** 10 ** 9 }}", {}) == (
        "18446744073709551616 0.5 1"
    )


def test_template_repetition_and_concatenation_are_bounded() -> None:
    assert "`*` on a text would make a text of 3,000,000,000 characters" in refused(
        "{{ 'a' * 3000000000 }}", "output_chars"
    )
    refused("{{ 3000000000 * 'a' }}", "output_chars")
    refused("{{ [0] * 3000000000 }}", "items")
    refused("{{ text * n }}", "output_chars", text="abc", n=2_000_000)
    refused("{{ ('a' * 3000000) + ('b' * 3000000) }}", "output_chars")
    refused("{{ (range(60000)|list) + (range(60000)|list) }}", "items")
    refused("{% set s = 'x' * 1000000 %}{{ s ~ s ~ s ~ s ~ s }}", "output_chars")
    assert templating.render("{{ 'ab' * 3 }}{{ [1] * 2 }}{{ 'x' * -1 }}{{ 1 ~ 'a' }}", {}) == (
        "ababab[1, 1]1a"
    )


def test_template_printing_a_list_of_one_long_text_many_times_is_bounded() -> None:
    # [s] * 1000 is cheap (1000 references); printing it is what would cost.
    long = "{% set s = 'x' * 1000000 %}"
    assert "printing a value" in refused(long + "{{ [s] * 1000 }}", "output_chars")
    for filtered in ("|string", "|tojson", "|pprint", "|join", "|e", "|upper"):
        refused(long + "{{ ([s] * 1000)" + filtered + " }}", "output_chars")
    assert "the filter 'pprint' on a value of more than 200,000 characters" in refused(
        "{{ (['y' * 1000] * 300)|pprint }}", "slow_filter_chars"
    )
    refused(long + "{{ '%s' % ([s] * 1000,) }}", "output_chars")
    refused(long + "{{ [{'n': [s] * 10}]|join(attribute='n') }}", "output_chars")
    refused(long + "{{ '{}'.format([s] * 1000) }}", "output_chars")


def test_template_ranges_sorts_and_joins_are_bounded() -> None:
    assert "range() would make 10,000,000 items" in refused("{{ range(10000000) }}", "items")
    refused("{{ range(10 ** 30) }}", "items")
    assert "the filter 'sort' would make 150,000 items" in refused(
        "{{ items|sort }}", "items", items=list(range(150_000))
    )
    for name in ("unique", "min", "max", "sum", "list", "reverse", "dictsort", "groupby"):
        argument = "(attribute=0)" if name == "groupby" else ""
        value: Any = dict.fromkeys(range(150_000)) if name == "dictsort" else range(150_000)
        refused("{{ items|" + name + argument + " }}", "items", items=iter(value))
    refused("{{ items|join(',') }}", "items", items=iter(range(150_000)))
    refused("{{ ([[1]] * 100000)|sum(start=[])|length }}", "cpu_seconds")
    assert templating.render(
        "{{ [3, 1, 2]|sort|join(',') }} {{ [[1], [2]]|sum(start=[]) }}", {}
    ) == ("1,2,3 [1, 2]")


@pytest.mark.parametrize(
    "template",
    [
        "{{ '%999999999d'|format(1) }}",
        "{{ '%.999999999f' % 1.5 }}",
        "{{ '%*d' % (999999999, 1) }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ '{:{w}}'.format(1, w=999999999) }}",
        "{{ '{a:>999999999}'.format_map({'a': 1}) }}",
        "{{ 'x'|center(999999999) }}",
        "{{ 'x\\ny'|indent(999999999) }}",
        "{{ 'x'.ljust(999999999) }}",
        "{{ 'x'.zfill(999999999) }}",
        "{{ '\\t'.expandtabs(999999999) }}",
        "{{ ('a' * 10000).replace('a', 'b' * 10000) }}",
        "{{ ('a' * 10000)|replace('a', 'b' * 10000) }}",
        "{{ 'aaaa'.translate({97: 'b' * 2000000}) }}",
        "{{ (1).to_bytes(999999999, 'big') }}",
        "{{ lipsum(1000000) }}",
        "{{ [1, [2, [3]]]|tojson(indent=99999999) }}",
    ],
)
def test_template_widths_and_amplifiers_are_bounded(template: str) -> None:
    refused(template, "output_chars")


def test_template_formatting_still_works() -> None:
    assert (
        templating.render(
            "{{ '%5.1f|%-3s|%(a)s' % {'a': 1} if false else '%5.1f|%-3s|' % (2.25, 'x') }}"
            "{{ '{:>4}|{:.2f}'.format(7, 1.5) }}{{ 'ab'|center(6) }}|{{ 'x'.zfill(3) }}",
            {},
        )
        == "  2.2|x  |   7|1.50  ab  |00x"
    )


def test_template_recursion_is_bounded() -> None:
    message = refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "call_depth")
    assert "calls nest more than 50 deep (a macro calling itself?)" in message
    # Two calls per level: exponential work, stopped by the depth limit too.
    refused("{% macro f() %}{{ f() }}{{ f() }}{% endmacro %}{{ f() }}", "call_depth")
    deep = (
        "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}done{% endif %}{% endmacro %}"
        "{{ f(40) }}"
    )
    assert templating.render(deep, {}) == "done"


def test_template_loops_are_bounded_even_without_output(
    limits: Callable[..., None],
) -> None:
    limits(cpu_seconds=60.0)  # the step count, not the clock
    empty = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    assert "the render took more than 1,000,000 steps" in refused(empty, "steps")
    limits(steps=10**12, cpu_seconds=0.05)  # and the clock, not the step count
    assert "the render used more than 0.05 s of CPU time" in refused(empty, "cpu_seconds")


def test_template_loop_over_a_generator_and_loop_length(limits: Callable[..., None]) -> None:
    limits(steps=100)
    assert templating.render(
        "{% for x in items %}{{ loop.length }}{% endfor %}", {"items": [1, 2]}
    ) == ("22")
    refused("{% for x in items %}{{ loop.length }}{% endfor %}", "steps", items=iter(range(500)))
    recursive = "{% for x in items recursive %}{{ loop(x) if x is iterable else x }}{% endfor %}"
    assert templating.render(recursive, {"items": [[1, [2]], 3]}) == "123"
    refused(recursive, "steps", items=[list(range(300))])


def test_template_output_is_capped(limits: Callable[..., None]) -> None:
    started = time.perf_counter()
    message = refused("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output_chars")
    assert "the output passed 4,000,000 characters" in message
    assert time.perf_counter() - started < 2
    # What macros, call blocks and set blocks build is capped as it is joined.
    refused(
        "{% macro m() %}{% for i in range(50000) %}{{ 'x' * 100 }}{% endfor %}{% endmacro %}"
        "{{ m()|length }}",
        "output_chars",
    )
    refused(
        "{% set t %}{% for i in range(50000) %}{{ 'y' * 100 }}{% endfor %}{% endset %}",
        "output_chars",
    )
    limits(built_chars=1_000)
    assert "built more than 1,000 characters of text in all" in refused(
        "{% for i in range(10) %}{% set s = 'z' * 200 %}{% endfor %}", "built_chars"
    )


def test_template_source_size_tokens_and_depth_are_checked_when_validated() -> None:
    for template, limit, says in (
        ("x" * 100_001, "source_chars", "the template is 100,001 characters long"),
        ("{{ a }}" * 1_000, "tokens", "more than 2,000 tags, names and operators"),
        ("{{ " + "[" * 60 + "]" * 60 + " }}", "depth", "nests more than 40 levels deep"),
        ("{{ " + "(" * 500 + "1" + ")" * 500 + " }}", "depth", "nests too deeply to compile"),
        ("{% for x in a %}" * 25 + "{% endfor %}" * 25, "depth", "at most about 20 loops"),
    ):
        started = time.perf_counter()
        with pytest.raises(ValidationError) as info:
            dp.TemplateConfig(template=template)
        assert time.perf_counter() - started < 1
        message = str(info.value)
        assert "template: refused by the template limits: " in message
        assert says in message
        assert f"limit {limit} = " in message
    # Plain text is one token however long: a long prompt is fine.
    dp.TemplateConfig(template="word " * 19_000 + "{{ x }}")


def test_template_failures_are_compiled_once() -> None:
    text = "{{ " + "-" * 1_500 + "1 }}  cached failure"
    before = compile_template.cache_info()
    for _ in range(3):
        with pytest.raises(TemplateLimitError, match="nests too deeply"):
            check_template(text)
    after = compile_template.cache_info()
    assert after.misses == before.misses + 1
    assert after.hits == before.hits + 2


def test_template_limit_fails_the_node_with_its_code() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "q"}),
            ("t", "template", {"template": "{{ q * 2000000000 }}"}),
            ("out", "output", {"name": "o"}),
        ],
        [("q.output", "t.q"), ("t.output", "out.value")],
    )

    async def run() -> RunResult:
        return await run_flow(flow, {"q": "ab"})

    result = asyncio.run(run())
    assert result.status == "failed"
    assert result.error is not None
    assert (result.error.code, result.error.node) == ("template_limit", "t")
    assert result.error.error_type == "TemplateLimitError"
    assert "`*` on a text would make a text of 4,000,000,000 characters" in result.error.message


def test_template_limit_reported_by_validate() -> None:
    flow = flow_from_tuples(
        [
            ("q", "text_input", {"name": "q"}),
            ("t", "template", {"template": "{{ q }}" * 1_000}),
            ("out", "output", {"name": "o"}),
        ],
        [("q.output", "t.q"), ("t.output", "out.value")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node) for p in problems] == [("invalid_config", "t")]
    assert "config field 'template'" in problems[0].message
    assert "(limit tokens = 2,000)" in problems[0].message


def test_template_urlize_leaves_long_words_unlinked() -> None:
    # Jinja's urlize is quadratic in a word's length (20,000 characters: 18 s).
    word = ")" * 20_000 + "a)"
    started = time.perf_counter()
    out = templating.render("{{ t|urlize }}", {"t": f"see www.example.com <{word}"})
    assert time.perf_counter() - started < 1
    assert out == (
        'see <a href="https://www.example.com" rel="noopener">www.example.com</a> &lt;' + word
    )


def test_template_sandbox_is_still_immutable() -> None:
    for template in (
        "{{ ''.__class__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ lipsum.__globals__ }}",
        "{{ range.__self__ }}",
        "{{ items.append(1) }}",
    ):
        with pytest.raises(ValueError, match=r"refused by the sandbox|undefined value"):
            templating.render(template, {"items": [1]})


# -- text ----------------------------------------------------------------------------------


def test_text_join() -> None:
    assert dp.text_join(dp.TextJoinConfig(), ["a", "b", "c"]) == "a\nb\nc"
    assert dp.text_join(dp.TextJoinConfig(separator=", "), ["a", "b"]) == "a, b"
    assert dp.text_join(dp.TextJoinConfig(), []) == ""


def test_text_join_rejects_non_text_separator() -> None:
    assert "separator" in config_error(dp.TextJoinConfig, {"separator": 3})


def test_text_split_defaults_strip_and_drop_empty() -> None:
    assert dp.text_split(dp.TextSplitConfig(), " one \n\n  two\n   \nthree\n") == [
        "one",
        "two",
        "three",
    ]


def test_text_split_keeps_everything_when_asked() -> None:
    config = dp.TextSplitConfig(separator=",", strip=False, drop_empty=False)
    assert dp.text_split(config, "a, b,,c") == ["a", " b", "", "c"]


def test_text_split_max_split() -> None:
    config = dp.TextSplitConfig(separator=":", max_split=1)
    assert dp.text_split(config, "key: a: b") == ["key", "a: b"]


def test_text_split_bad_config() -> None:
    assert "separator" in config_error(dp.TextSplitConfig, {"separator": ""})
    assert "max_split" in config_error(dp.TextSplitConfig, {"max_split": -1})


async def test_text_split_then_length_in_a_flow() -> None:
    flow = flow_from_tuples(
        [
            ("text", "text_input", {"name": "text"}),
            ("split", "text_split", {"separator": ","}),
            ("count", "list_length", {}),
            ("parts", "output", {"name": "parts"}),
            ("n", "output", {"name": "n"}),
        ],
        [
            ("text.output", "split.text"),
            ("split.output", "count.items"),
            ("split.output", "parts.value"),
            ("count.output", "n.value"),
        ],
    )
    result = await run_flow(flow, {"text": "a, b,, c"})
    assert result.status == "succeeded"
    assert result.outputs == {"parts": ["a", "b", "c"], "n": 3}


# -- regular expressions --------------------------------------------------------------------


def test_regex_extract_first_match() -> None:
    config = dp.RegexConfig(pattern=r"order #(\d+)", group=1)
    assert dp.regex_extract(config, "see order #42 and order #7") == "42"
    assert dp.regex_extract(dp.RegexConfig(pattern=r"\d+"), "a 12 b 3") == "12"


def test_regex_extract_no_match_is_none() -> None:
    assert dp.regex_extract(dp.RegexConfig(pattern=r"\d+"), "no digits") is None


def test_regex_extract_named_group_and_flags() -> None:
    config = dp.RegexConfig(pattern=r"^name: (?P<name>\w+)$", group="name", flags=["MULTILINE"])
    assert dp.regex_extract(config, "id: 1\nname: Tom\n") == "Tom"
    lower = dp.RegexConfig(pattern="hello", flags=["IGNORECASE"])
    assert dp.regex_extract(lower, "say HeLLo") == "HeLLo"
    dotall = dp.RegexConfig(pattern="a.b", flags=["DOTALL"])
    assert dp.regex_extract(dotall, "a\nb") == "a\nb"


def test_regex_group_not_in_match_gives_empty_text() -> None:
    config = dp.RegexConfig(pattern=r"(a)|(b)", group=1)
    assert dp.regex_extract(config, "b") == ""


def test_regex_group_number_given_as_text() -> None:
    config = dp.RegexConfig.model_validate({"pattern": r"(\w+)@", "group": "1"})
    assert config.group == 1
    assert dp.regex_extract(config, "tom@example.com") == "tom"


def test_regex_find_all() -> None:
    assert dp.regex_find_all(dp.RegexConfig(pattern=r"\d+"), "a1 b22 c333") == ["1", "22", "333"]
    config = dp.RegexConfig(pattern=r"(\w)=(\d)", group=2)
    assert dp.regex_find_all(config, "a=1, b=2") == ["1", "2"]
    assert dp.regex_find_all(dp.RegexConfig(pattern="x"), "abc") == []


def test_regex_bad_config() -> None:
    message = config_error(dp.RegexConfig, {"pattern": "(unclosed"})
    assert "pattern is not a valid regular expression: missing ), unterminated subpattern" in (
        message
    )
    message = config_error(dp.RegexConfig, {"pattern": r"(\d)", "group": 2})
    assert "group 2 does not exist: the pattern has 1 group(s)" in message
    message = config_error(dp.RegexConfig, {"pattern": r"(?P<x>\d)", "group": "y"})
    assert "group 'y' does not exist (named groups: x)" in message
    assert "flags" in config_error(dp.RegexConfig, {"pattern": "a", "flags": ["VERBOSE"]})


def test_regex_extract_refuses_a_typed_wrong_edge() -> None:
    flow = flow_from_tuples(
        [
            ("n", "number_input", {"name": "n"}),
            ("re", "regex_extract", {"pattern": "a"}),
            ("out", "output", {"name": "o"}),
        ],
        [("n.output", "re.text"), ("re.output", "out.value")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node, p.port) for p in problems] == [("type_mismatch", "re", "text")]


# -- the regex engine: Python's syntax on RE2 (dagwright.safe_regex; issue 13, finding 5) -----

CORPUS_PATTERNS = [
    r"\d+",
    r"order #(\d+)",
    r"^name: (?P<name>\w+)$",
    r"(\w+)@",
    r"(\w)=(\d)",
    r"(a)|(b)",
    "a.b",
    r"\w+",
    r"\W+",
    r"\s+",
    r"\S+",
    r"\D",
    r"[\w-]+",
    r"[^\w]",
    r"[^\W\d]+",
    r"[^\W\d_]+",
    r"[^\W_]+",
    r"[\d\s]+",
    r"[\W\d]+",
    r"^\d+$",
    r"\d+$",
    r"$",
    r"^",
    r"a*",
    r"(a|ab)(c|bcd)(d*)",
    r"x*?y",
    r"(?i)straße",
    r"(?i)k",
    r"(?x) a b # comment",
    r"a(?#c)b",
    r"\Aab\Z",
    r"(?m)^\w+$",
    r"(?s).+",
    r".+",
    r"(?i:A)b",
    r"(?-i:a)B",
    r"[a-z]{2,3}",
    r"\bcat\b",
    r"é+",
    r"\u00e9",
    r"\N{EM DASH}",
    r"(?a)\w+",
    r"(?a:\d)+",
    r"[^a]",
    r"(?:ab)+$",
    r"(a$)",
    r"a$|b",
    r"(?P<x>é)(?P<y>\d)?",
    r"\$\d+(?:\.\d\d)?",
    r"[.]\d",
    r"\\",
    r"(\d+)-(\d+)$",
    r"[\u4e00-\u9fff]+",
    r"\n$",
    r"(?:)",
    r"a{0}",
    r"a{3,}",
    r"[^\d\s]",
    r".*$",
    r"a??b",
    r"(?:a|)$",
]
CORPUS_TEXTS = [
    "",
    "a",
    "ab\n",
    "order #42 and order #7",
    "id: 1\nname: Tom\n",
    "tom@example.com",
    "a=1, b=2",
    "b",
    "say HeLLo",
    "a\nb",
    "José ñandú ١٢٣ \uff15 x_y",
    "42\n",
    "42",
    "4 2\n\n",
    "cat concat cat\n",
    "STRASSE straße",
    "K k \u212a",
    "ab\nab\n",
    "aab\n",
    "abcd",
    "€12.50 $3 $4.5\n",
    "中文字符 abc",
    "\u2003\u00a0\t x",
    "é1é",
    "é",
    "a\n",
    "\n",
    "aaaa",
    "xy xxy y",
    "b\n",
    "a\u2014b",
]


def spans(matches: Iterable[Any], groups: int) -> list[tuple[tuple[int, int], ...]]:
    return [tuple(m.span(g) for g in range(groups + 1)) for m in matches]


@pytest.mark.parametrize("flags", [0, re.IGNORECASE, re.MULTILINE, re.DOTALL])
def test_regex_engine_agrees_with_python(flags: int) -> None:
    """Every match, group span and yes/no answer as Python's re finds them, over a corpus of
    patterns and texts (Unicode classes, anchors, `$` before a final newline, empty matches,
    flags, named groups)."""
    for pattern in CORPUS_PATTERNS:
        if flags & re.IGNORECASE and pattern == r"(?a)\w+":
            continue  # documented: RE2 folds case by Unicode rules even for ASCII classes
        python = re.compile(pattern, flags)
        ours = compile_user_regex(pattern, flags)
        assert (ours.groups, dict(ours.groupindex)) == (python.groups, python.groupindex)
        for text in CORPUS_TEXTS:
            expected = spans(python.finditer(text), python.groups)
            assert spans(ours.finditer(text), ours.groups) == expected, (pattern, text)
            assert [m.span() for m in ours.finditer(text, groups=False)] == [
                s[0] for s in expected
            ], (pattern, text)
            first = python.search(text)
            found = ours.search(text)
            assert (found and found.groups()) == (first and first.groups()), (pattern, text)
            assert ours.contains_match(text) == (first is not None), (pattern, text)


def test_regex_unicode_classes_are_pythons() -> None:
    """\\d, \\w, \\s and their negations, with and without the ASCII flag, over every code point
    (only those Python 3.11's Unicode database leaves unassigned may differ)."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for prefix, escape in [("", e) for e in (r"\d", r"\D", r"\w", r"\W", r"\s", r"\S")] + [
        ("(?a)", e) for e in (r"\w", r"\s", r"\D")
    ]:
        runs = f"{prefix}(?:{escape})+"  # runs of characters: a few thousand matches
        python = set("".join(re.findall(runs, everything)))
        ours = set("".join(m.group() for m in compile_user_regex(runs).finditer(everything)))
        different = python ^ ours
        assert all(unicodedata.category(c) == "Cn" for c in different), (runs, different)
    assert compile_user_regex(r"[^\W\d_]+").search("_é1x") is not None


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(a)\1", r"a backreference (\1 or (?P=name))"),
        (r"(?P<x>a)(?P=x)", "a backreference"),
        (r"(?=a)", "a lookahead (?=...)"),
        (r"(?!a)", "a negative lookahead (?!...)"),
        (r"(?<=a)b", "a lookbehind (?<=...)"),
        (r"(?<!a)b", "a negative lookbehind (?<!...)"),
        (r"(a)?(?(1)b|c)", "a conditional group ((?(1)yes|no))"),
        (r"(?>a)", "an atomic group (?>...)"),
        (r"a*+", "a possessive quantifier"),
        (r"[^\W\s]", r"a negated class combining \W or \S with other items"),
    ],
)
def test_regex_constructs_re2_lacks_are_refused_by_name(pattern: str, construct: str) -> None:
    with pytest.raises(RegexError) as info:
        compile_user_regex(pattern, label="pattern")
    assert info.value.code == "regex_unsupported"
    assert info.value.message.startswith(f"pattern uses {construct}")
    assert "which RE2 (the linear-time engine user patterns run on) does not support" in (
        info.value.message
    )
    assert isinstance(info.value, ValueError)  # a validation problem of the field


def test_regex_limits_of_the_pattern() -> None:
    for pattern, code, says in (
        ("a" * 10_001, "regex_limit", "pattern is 10,001 characters long (limit 10,000)"),
        (r"a{1001}", "regex_limit", "a repetition count of 1,001 (RE2 allows at most 1,000)"),
        (r"((a{100}){100}){100}", "regex_limit", "counted repetitions nested too deeply"),
        (r"[\w\d]{1000}" * 5, "regex_limit", "is too large for RE2"),
        ("(unclosed", "regex_invalid", "missing ), unterminated subpattern at position 0"),
    ):
        with pytest.raises(RegexError) as info:
            compile_user_regex(pattern)
        assert (info.value.code, says in info.value.message) == (code, True), info.value.message


def test_regex_failures_are_compiled_once() -> None:
    pattern = r"(?<=once)x"
    before = safe_regex._compile_cached.cache_info()
    for _ in range(3):
        with pytest.raises(RegexError):
            compile_user_regex(pattern)
    after = safe_regex._compile_cached.cache_info()
    assert (after.misses, after.hits) == (before.misses + 1, before.hits + 2)


def test_regex_catastrophic_patterns_are_linear() -> None:
    hostile = "a" * 200_000 + "!"
    started = time.perf_counter()
    for pattern in (r"(a+)+$", r"(a|aa)+$", r"^(a|a?)+$", r"(\w+\s?)+$", r"(.*a){20}$"):
        assert compile_user_regex(pattern).search(hostile) is None
        assert dp.regex_extract(dp.RegexConfig(pattern=pattern, group=1), hostile) is None
        assert dp.regex_find_all(dp.RegexConfig(pattern=pattern), hostile) == []
    assert time.perf_counter() - started < 2  # Python's re: hours


def test_regex_each_search_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    regex = compile_user_regex(r"a.{30}c")
    assert regex.positions == 32
    regex.check_work("x" * 156_250, safe_regex.INLINE_WORK)
    with pytest.raises(RegexError) as info:
        regex.contains_match("x" * 156_251, work_limit=safe_regex.INLINE_WORK)
    assert info.value.code == "regex_limit"
    assert "a text of 156,251 characters is too long for this pattern (32 positions" in (
        info.value.message
    )
    # Matches are capped, and so is the CPU time of finding them: each limit on its own (on a
    # loaded machine 100,000 matches may take past the 1 s CPU cap before the count cap).
    monkeypatch.setattr(safe_regex, "MAX_FIND_SECONDS", 60.0)
    with pytest.raises(RegexError, match="matches more than 100,000 times"):
        dp.regex_find_all(dp.RegexConfig(pattern="(?:)"), "x" * 200_000)
    monkeypatch.setattr(safe_regex, "MAX_FIND_SECONDS", 0.0)
    with pytest.raises(RegexError, match="took more than 0 s of CPU time"):
        list(compile_user_regex("x").finditer("x" * 1_000))


def test_regex_dollar_before_a_final_newline_and_empty_matches() -> None:
    assert dp.regex_extract(dp.RegexConfig(pattern=r"^\d+$"), "42\n") == "42"
    assert dp.regex_find_all(dp.RegexConfig(pattern=r".*$"), "ab\n") == ["ab", "", ""]
    # Documented difference: after an empty match the next one starts a character later.
    assert dp.regex_find_all(dp.RegexConfig(pattern="|a"), "a") == ["", ""]
    assert re.findall("|a", "a") == ["", "a", ""]


def test_regex_text_with_lone_surrogates() -> None:
    text = "x\ud800y 12"
    assert dp.regex_extract(dp.RegexConfig(pattern=r"\d+"), text) == "12"
    assert dp.regex_extract(dp.RegexConfig(pattern=r"x.y"), text) == "x\ud800y"


def test_regex_blocks_always_run_in_a_worker_thread() -> None:
    registry = Registry.default()
    # RE2 releases the GIL while it matches, in a thread: never moved onto the event loop.
    assert registry.get("regex_extract").mode == "thread"
    assert registry.get("regex_find_all").mode == "thread"


def test_regex_names_any_python_identifier() -> None:
    config = dp.RegexConfig(pattern=r"(?P<名前>\w+)@", group="名前")
    assert dp.regex_extract(config, "トム@example.com") == "トム"


# -- JSON ----------------------------------------------------------------------------------

DATA = {
    "items": [
        {"name": "pen", "price": 2},
        {"name": "book", "price": 12},
        {"name": "lamp", "price": 30},
    ],
    "owner": {"name": "Ann"},
}


def test_json_path_matches() -> None:
    assert dp.json_path(dp.JsonPathConfig(path="$.items[*].name"), DATA) == ["pen", "book", "lamp"]
    assert dp.json_path(dp.JsonPathConfig(path="$.items[?(@.price > 10)].name"), DATA) == [
        "book",
        "lamp",
    ]
    assert dp.json_path(dp.JsonPathConfig(path="$..name"), DATA) == ["pen", "book", "lamp", "Ann"]
    assert dp.json_path(dp.JsonPathConfig(path="$.missing"), DATA) == []


def test_json_path_first() -> None:
    assert dp.json_path(dp.JsonPathConfig(path="$.owner.name", first=True), DATA) == "Ann"
    assert dp.json_path(dp.JsonPathConfig(path="$.items[1]", first=True), DATA) == {
        "name": "book",
        "price": 12,
    }
    assert dp.json_path(dp.JsonPathConfig(path="$.nothing", first=True), DATA) is None


def test_json_path_bad_path_is_a_config_error() -> None:
    message = config_error(dp.JsonPathConfig, {"path": "$.items["})
    assert "path is not a valid JSONPath expression: Parse error" in message


def test_json_path_regex_filter_runs_on_re2() -> None:
    data = {"items": [{"n": "apple"}, {"n": "Banana"}, {"n": 3}, {"n": "a" * 100_000 + "!"}]}
    config = dp.JsonPathConfig(path="$.items[?(@.n =~ '^[bB]an')].n")
    assert dp.json_path(config, data) == ["Banana"]
    started = time.perf_counter()
    hostile = dp.JsonPathConfig(path="$.items[?(@.n =~ '(a+)+$')].n")
    # jsonpath_ng's own `=~` (Python's re) takes hours on the last item.
    assert dp.json_path(hostile, data) == ["Banana"]
    assert time.perf_counter() - started < 1


def test_json_path_refuses_what_it_cannot_bound() -> None:
    message = config_error(dp.JsonPathConfig, {"path": "$.items[?(@.n =~ '(?<=a)b')]"})
    assert "path: the `=~` pattern '(?<=a)b' uses a lookbehind (?<=...)" in message
    message = config_error(dp.JsonPathConfig, {"path": "$.s.`sub(/(a+)+$/, b)`"})
    assert "path uses `sub()`, which runs a regular expression on Python's backtracking" in (
        message
    )


def test_json_path_arithmetic_is_bounded() -> None:
    assert dp.json_path(dp.JsonPathConfig(path="$.s * 3"), {"s": "ab"}) == ["ababab"]
    assert dp.json_path(dp.JsonPathConfig(path="$.a + $.b"), {"a": 2, "b": 3}) == [5]
    for path, data, says in (
        ("$.s * 1000000000", {"s": "ab"}, "`*` would make a value of 2,000,000,000 characters"),
        ("$.s * $.n", {"s": "ab", "n": 10**9}, "`*` would make a value of 2,000,000,000"),
        ("$.n * $.n", {"n": 10**2000}, "`*` would make an integer of about 13,288 bits"),
        ("$.s + $.s", {"s": "x" * 3_000_000}, "`+` would make a value of 6,000,000"),
    ):
        with pytest.raises(ValueError, match="path: ") as info:
            dp.json_path(dp.JsonPathConfig(path=path), data)
        assert says in str(info.value)


async def test_json_path_in_a_flow() -> None:
    flow = flow_from_tuples(
        [
            ("data", "json_input", {"name": "data"}),
            ("sel", "json_path", {"path": "$.items[*].price"}),
            ("out", "output", {"name": "prices"}),
        ],
        [("data.output", "sel.data"), ("sel.output", "out.value")],
    )
    result = await run_flow(flow, {"data": DATA})
    assert result.status == "succeeded"
    assert result.outputs == {"prices": [2, 12, 30]}


def test_to_json() -> None:
    value = {"b": [1, 2.5, None, True], "a": "é"}
    assert dp.to_json(dp.ToJsonConfig(), value) == '{"b": [1, 2.5, null, true], "a": "é"}'
    assert dp.to_json(dp.ToJsonConfig(indent=2, sort_keys=True), {"b": 1, "a": [1]}) == (
        '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
    )


def test_to_json_writes_pydantic_models() -> None:
    class Point(BaseModel):
        x: int
        y: int

    assert dp.to_json(dp.ToJsonConfig(), [Point(x=1, y=2)]) == '[{"x": 1, "y": 2}]'


def test_to_json_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(ValueError, match="input 'value' cannot be written as JSON: a set cannot"):
        dp.to_json(dp.ToJsonConfig(), {"a": {1, 2}})
    with pytest.raises(ValueError, match="input 'value' cannot be written as JSON: Out of range"):
        dp.to_json(dp.ToJsonConfig(), [math.nan])
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="input 'value' cannot be written as JSON"):
        dp.to_json(dp.ToJsonConfig(), loop)
    assert "indent" in config_error(dp.ToJsonConfig, {"indent": -1})


def test_from_json() -> None:
    assert dp.from_json('{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}
    assert dp.from_json(" 3 ") == 3


def test_from_json_reports_line_and_column() -> None:
    with pytest.raises(
        ValueError,
        match=r"input 'text' is not valid JSON: Expecting value at line 2, column 7",
    ):
        dp.from_json('{"a": 1,\n "b": }')


async def test_to_json_and_back_in_a_flow() -> None:
    flow = flow_from_tuples(
        [
            ("data", "json_input", {"name": "data"}),
            ("dump", "to_json", {"sort_keys": True}),
            ("load", "from_json", {}),
            ("text", "output", {"name": "text"}),
            ("value", "output", {"name": "value"}),
        ],
        [
            ("data.output", "dump.value"),
            ("dump.output", "load.text"),
            ("dump.output", "text.value"),
            ("load.output", "value.value"),
        ],
    )
    result = await run_flow(flow, {"data": {"z": 1, "a": [True]}})
    assert result.status == "succeeded"
    assert result.outputs == {"text": '{"a": [true], "z": 1}', "value": {"a": [True], "z": 1}}


async def test_from_json_bad_text_fails_the_run() -> None:
    flow = flow_from_tuples(
        [
            ("t", "text_input", {"name": "t"}),
            ("load", "from_json", {}),
            ("out", "output", {"name": "o"}),
        ],
        [("t.output", "load.text"), ("load.output", "out.value")],
    )
    result = await run_flow(flow, {"t": "{oops}"})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "load"
    assert result.error.message == (
        "node 'load' (from_json) failed: ValueError: input 'text' is not valid JSON: "
        "Expecting property name enclosed in double quotes at line 1, column 2"
    )


# -- lists ---------------------------------------------------------------------------------


def test_list_length() -> None:
    assert dp.list_length(["a", "b", "c"]) == 3
    assert dp.list_length([]) == 0


async def test_list_length_refuses_a_non_list_at_run_time() -> None:
    flow = flow_from_tuples(
        [
            ("data", "json_input", {"name": "data"}),
            ("len", "list_length", {}),
            ("out", "output", {"name": "o"}),
        ],
        [("data.output", "len.items"), ("len.output", "out.value")],
    )
    result = await run_flow(flow, {"data": {"not": "a list"}})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "len"
    assert "input 'items' from data.output -> len.items: expected list[Any], got dict" in (
        result.error.message
    )


def test_list_slice() -> None:
    items = ["a", "b", "c", "d", "e"]
    assert dp.list_slice(dp.ListSliceConfig(start=1, stop=3), items) == ["b", "c"]
    assert dp.list_slice(dp.ListSliceConfig(stop=-1), items) == ["a", "b", "c", "d"]
    assert dp.list_slice(dp.ListSliceConfig(step=2), items) == ["a", "c", "e"]
    assert dp.list_slice(dp.ListSliceConfig(step=-1), items) == ["e", "d", "c", "b", "a"]
    assert dp.list_slice(dp.ListSliceConfig(start=10), items) == []
    assert dp.list_slice(dp.ListSliceConfig(), items) == items


def test_list_slice_step_zero_refused() -> None:
    assert "step cannot be 0" in config_error(dp.ListSliceConfig, {"step": 0})


def test_list_unique_keeps_first_occurrences() -> None:
    assert dp.list_unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


def test_list_unique_compares_unhashable_items_by_content() -> None:
    items = [{"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, {"a": 2}, [1, {"x": 1}], [1, {"x": 1}]]
    assert dp.list_unique(items) == [{"a": 1, "b": [1, 2]}, {"a": 2}, [1, {"x": 1}]]


def test_list_unique_keeps_kinds_apart_but_not_number_spellings() -> None:
    assert dp.list_unique([1, "1", True, 1.0, 2.5, None, None, False, 0]) == [
        1,
        "1",
        True,
        2.5,
        None,
        False,
        0,
    ]


def test_list_unique_falls_back_to_equality() -> None:
    assert dp.list_unique([{1, 2}, {2, 1}, {3}, "x", "x"]) == [{1, 2}, {3}, "x"]


def test_list_flatten() -> None:
    items = [[1, 2], [3, [4, [5]]], 6, []]
    assert dp.list_flatten(dp.ListFlattenConfig(), items) == [1, 2, 3, [4, [5]], 6]
    assert dp.list_flatten(dp.ListFlattenConfig(depth=2), items) == [1, 2, 3, 4, [5], 6]
    assert dp.list_flatten(dp.ListFlattenConfig(depth=5), items) == [1, 2, 3, 4, 5, 6]


def test_list_flatten_depth_must_be_positive() -> None:
    assert "depth" in config_error(dp.ListFlattenConfig, {"depth": 0})


def test_zip_records() -> None:
    config = dp.ZipRecordsConfig(fields=["name", "age"])
    assert dp.zip_records(config, name=["Tom", "Ann"], age=[30, 25]) == [
        {"name": "Tom", "age": 30},
        {"name": "Ann", "age": 25},
    ]
    assert dp.zip_records(config, name=[], age=[]) == []


def test_zip_records_strict_lengths() -> None:
    config = dp.ZipRecordsConfig(fields=["name", "age"])
    with pytest.raises(ValueError, match="differ in length") as info:
        dp.zip_records(config, name=["Tom", "Ann", "Bo"], age=[30])
    assert str(info.value) == (
        "the lists differ in length ('name' has 3, 'age' has 1); "
        "turn strict off to cut them to the shortest"
    )


def test_zip_records_not_strict_truncates() -> None:
    config = dp.ZipRecordsConfig(fields=["name", "age"], strict=False)
    assert dp.zip_records(config, name=["Tom", "Ann", "Bo"], age=[30]) == [
        {"name": "Tom", "age": 30}
    ]


def test_zip_records_bad_inputs() -> None:
    config = dp.ZipRecordsConfig(fields=["name", "age"])
    with pytest.raises(ValueError, match="input port 'age' has no value"):
        dp.zip_records(config, name=["Tom"])
    with pytest.raises(ValueError, match="input port 'city' is not one of the fields"):
        dp.zip_records(config, name=["Tom"], age=[1], city=["x"])
    with pytest.raises(ValueError, match="input port 'age' takes a list, not str"):
        dp.zip_records(config, name=["Tom"], age="30")


def test_zip_records_bad_config() -> None:
    assert "at least 1 item" in config_error(dp.ZipRecordsConfig, {"fields": []})
    message = config_error(dp.ZipRecordsConfig, {"fields": ["a", "b", "a"]})
    assert "field name 'a' is given twice" in message
    assert "cannot be empty" in config_error(dp.ZipRecordsConfig, {"fields": [""]})


def test_zip_records_ports_follow_fields() -> None:
    spec = Registry.default().get("zip_records")
    ports = spec.input_ports(dp.ZipRecordsConfig(fields=["name", "age"]))
    assert list(ports) == ["name", "age"]
    assert spec.dynamic_port_type == list[Any]


async def test_zip_records_in_a_flow() -> None:
    flow = flow_from_tuples(
        [
            ("names", "list_input", {"name": "names"}),
            ("ages", "list_input", {"name": "ages"}),
            ("zip", "zip_records", {"fields": ["name", "age"]}),
            ("out", "output", {"name": "rows"}),
        ],
        [("names.output", "zip.name"), ("ages.output", "zip.age"), ("zip.output", "out.value")],
    )
    result = await run_flow(flow, {"names": "Tom, Ann", "ages": [30, 25]})
    assert result.status == "succeeded"
    assert result.outputs == {"rows": [{"name": "Tom", "age": 30}, {"name": "Ann", "age": 25}]}

    result = await run_flow(flow, {"names": ["Tom"], "ages": [30, 25]})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "zip"
    assert "'name' has 1, 'age' has 2" in result.error.message

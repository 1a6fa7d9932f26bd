"""The data_process blocks: called directly as functions and run inside real flows."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from dagwright.blocks import data_process as dp
from dagwright.errors import BlockConfigError
from dagwright.registry import Registry
from dagwright.runtime import Executor, Flow, RunResult, compile_flow, validate
from dagwright.templating import compile_template
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

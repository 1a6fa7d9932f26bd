"""The condition blocks: compare and switch, called directly and routing real runs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import ValidationError

from dagwright.blocks import condition as cond
from dagwright.registry import Registry, Route
from dagwright.runtime import (
    Executor,
    Flow,
    NodeFinished,
    NodeSkipped,
    RunResult,
    compile_flow,
    validate,
)
from dagwright.safe_regex import RegexError
from support.flows import flow_from_tuples

# -- helpers -------------------------------------------------------------------------------


async def run_flow(flow: Flow, inputs: dict[str, Any]) -> RunResult:
    plan = compile_flow(flow, Registry.default())
    return await Executor().run(plan, inputs)


def skipped(result: RunResult) -> set[str]:
    return {e.node for e in result.events if isinstance(e, NodeSkipped)}


def branch_of(result: RunResult, node: str) -> str | None:
    for event in result.events:
        if isinstance(event, NodeFinished) and event.node == node:
            return event.branch
    raise AssertionError(f"node {node!r} did not finish")


def check(op: str, value: Any, operand: Any = None, **config: Any) -> str:
    """The branch compare takes, checking the value passes through unchanged."""
    route = cond.compare(cond.CompareConfig(op=op, operand=operand, **config), value)
    assert isinstance(route, Route)
    assert route.value is value
    return route.branch


# -- compare: direct -----------------------------------------------------------------------


def test_compare_returns_the_value_unchanged_down_a_branch() -> None:
    value = {"score": 3}
    route = cond.compare(cond.CompareConfig(op="is_not_empty"), value)
    assert route == Route("true", value)
    assert route.value is value


def test_compare_equality() -> None:
    assert check("==", "yes", "yes") == "true"
    assert check("==", "yes", "no") == "false"
    assert check("!=", "yes", "no") == "true"
    assert check("==", [1, {"a": 2}], [1, {"a": 2}]) == "true"
    assert check("==", None, None) == "true"
    assert check("==", 0, None) == "false"


def test_compare_numbers_and_numeric_texts() -> None:
    assert check("==", 5, 5.0) == "true"
    assert check("==", 5, "5") == "true"
    assert check("==", "5.0", 5) == "true"
    assert check(">", 42, "10") == "true"
    assert check("<", " 3 ", 10) == "true"
    assert check(">=", 2.5, 2.5) == "true"
    assert check("<=", 3, 2) == "false"
    # two texts compare as texts, even when they look like numbers
    assert check("<", "10", "9") == "true"
    assert check("==", "5", "5.0") == "false"


def test_compare_booleans_are_not_numbers() -> None:
    assert check("==", True, 1) == "false"
    assert check("==", False, 0) == "false"
    assert check("==", True, True) == "true"
    with pytest.raises(ValueError, match="cannot compare bool > int"):
        check(">", True, 0)


def test_compare_incomparable_types_name_both() -> None:
    with pytest.raises(ValueError, match="cannot compare") as info:
        check("<", "abc", 3)
    assert str(info.value) == "cannot compare str < int: '<' needs two numbers or two texts"
    with pytest.raises(ValueError, match="cannot compare list >= list"):
        check(">=", [1], [2])
    with pytest.raises(ValueError, match="cannot compare None > int"):
        check(">", None, 3)


def test_compare_texts_order_alphabetically() -> None:
    assert check("<", "apple", "banana") == "true"
    assert check(">", "b", "a") == "true"


def test_compare_contains() -> None:
    assert check("contains", "hello world", "o w") == "true"
    assert check("contains", "hello", "x") == "false"
    assert check("contains", ["a", "b"], "b") == "true"
    assert check("contains", [1, 2], "2") == "true"  # a numeric text matches the number
    assert check("contains", [True], 1) == "false"
    assert check("contains", {"key": 1}, "key") == "true"
    assert check("contains", {"key": 1}, "other") == "false"


def test_compare_contains_bad_types() -> None:
    with pytest.raises(ValueError, match="'contains' on a text needs a text operand, not int"):
        check("contains", "abc", 3)
    with pytest.raises(ValueError, match="'contains' on an object looks for a key"):
        check("contains", {"a": 1}, 1)
    with pytest.raises(ValueError, match="'contains' needs a text, list or object value, not int"):
        check("contains", 12, "1")


def test_compare_starts_and_ends_with() -> None:
    assert check("starts_with", "Hello there", "Hello") == "true"
    assert check("starts_with", "Hello there", "there") == "false"
    assert check("ends_with", "report.pdf", ".pdf") == "true"
    with pytest.raises(ValueError, match="'ends_with' needs a text value and a text operand"):
        check("ends_with", ["a"], "a")


def test_compare_regex() -> None:
    assert check("regex", "order #42", r"#\d+") == "true"
    assert check("regex", "order", r"#\d+") == "false"
    with pytest.raises(ValueError, match="'regex' needs a text value and a text pattern"):
        check("regex", 42, r"\d")


def test_compare_regex_bad_pattern_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="is not a valid regular expression"):
        cond.CompareConfig(op="regex", operand="(oops")
    with pytest.raises(ValidationError, match="operand of op 'regex' must be a text, not int"):
        cond.CompareConfig(op="regex", operand=3)


def test_compare_regex_bad_pattern_on_the_port_fails() -> None:
    config = cond.CompareConfig(op="regex")
    with pytest.raises(ValueError, match="operand '\\[a' is not a valid regular expression"):
        cond.compare(config, "abc", "[a")


def test_compare_regex_runs_in_linear_time() -> None:
    # compare runs on the event loop: Python's re froze the server on these (issue 13).
    hostile = "a" * 100_000 + "!"
    started = time.perf_counter()
    for pattern in (r"(a+)+$", r"(a|aa)+$", r"(.*a){20}!x", r"^(\w+\s?)+$"):
        assert check("regex", hostile, pattern) == "false"
        assert check("regex", hostile, pattern, case_sensitive=False) == "false"
    assert time.perf_counter() - started < 1
    assert check("regex", "Café ١٢", r"\w+ \d+$") == "true"  # Unicode classes, as in Python
    assert check("regex", "total: 42\n", r"^total: \d+$") == "true"  # $ before a final newline


def test_compare_regex_constructs_re2_lacks_are_refused() -> None:
    with pytest.raises(ValidationError, match=r"operand '\(\?<=a\)b' uses a lookbehind"):
        cond.CompareConfig(op="regex", operand="(?<=a)b")
    config = cond.CompareConfig(op="regex")
    with pytest.raises(RegexError) as info:
        cond.compare(config, "aa", r"(a)\1")  # a pattern arriving at the operand port
    assert info.value.code == "regex_unsupported"
    assert r"operand '(a)\\1' uses a backreference" in info.value.message


def test_compare_regex_search_is_bounded_for_the_event_loop() -> None:
    config = cond.CompareConfig(op="regex", operand=r"a.{30}c")
    assert cond.compare(config, "x" * 150_000).branch == "false"
    with pytest.raises(RegexError) as info:
        cond.compare(config, "x" * 200_000)
    assert info.value.code == "regex_limit"
    assert "a text of 200,000 characters is too long for this pattern (32 positions" in (
        info.value.message
    )
    assert check("regex", "ab" * 1_000_000 + "c", r"b+c") == "true"  # few positions: long text


def test_compare_case_insensitive() -> None:
    assert check("==", "Yes", "yes") == "false"
    assert check("==", "Yes", "yes", case_sensitive=False) == "true"
    assert check("contains", "Hello World", "WORLD", case_sensitive=False) == "true"
    assert check("contains", ["Apple"], "apple", case_sensitive=False) == "true"
    assert check("contains", {"Name": 1}, "name", case_sensitive=False) == "true"
    assert check("starts_with", "Hello", "hE", case_sensitive=False) == "true"
    # the pattern is not lowercased (\S stays \S): IGNORECASE is used instead
    assert check("regex", "ABC", r"^\S+c$", case_sensitive=False) == "true"
    assert check("<", "apple", "Banana", case_sensitive=False) == "true"


def test_compare_is_empty() -> None:
    empties: list[Any] = [None, "", "  \n", [], {}]
    for empty in empties:
        assert check("is_empty", empty) == "true"
        assert check("is_not_empty", empty) == "false"
    for full in ("a", [None], {"a": None}, 0, False):
        assert check("is_empty", full) == "false"
        assert check("is_not_empty", full) == "true"


def test_compare_operand_port_overrides_config() -> None:
    config = cond.CompareConfig(op=">", operand=100)
    assert cond.compare(config, 42).branch == "false"
    assert cond.compare(config, 42, 10).branch == "true"
    assert cond.compare(config, 42, None).branch == "false"  # None: the config's operand


def test_compare_missing_operand() -> None:
    with pytest.raises(ValueError, match="needs an operand") as info:
        cond.compare(cond.CompareConfig(op="contains"), "abc")
    assert str(info.value) == (
        "op 'contains' needs an operand: set the config field 'operand' or wire the 'operand' port"
    )


def test_compare_bad_op_is_a_config_error() -> None:
    with pytest.raises(ValidationError, match="op"):
        cond.CompareConfig.model_validate({"op": "=~"})


def test_compare_spec() -> None:
    spec = Registry.default().get("compare")
    assert spec.is_condition
    assert spec.branch_names(cond.CompareConfig()) == ["true", "false"]
    assert spec.inputs["value"].required
    assert not spec.inputs["operand"].required
    assert spec.inputs["operand"].default is None


# -- compare: in a flow --------------------------------------------------------------------


def threshold_flow() -> Flow:
    return flow_from_tuples(
        [
            ("n", "number_input", {"name": "n"}),
            ("cmp", "compare", {"op": ">", "operand": 10}),
            ("big", "output", {"name": "big"}),
            ("say", "template", {"template": "small: {{ v }}"}),
            ("small", "output", {"name": "small"}),
        ],
        [
            ("n.output", "cmp.value"),
            ("cmp.output", "big.value", "true"),
            ("cmp.output", "say.v", "false"),
            ("say.output", "small.value"),
        ],
    )


async def test_compare_routes_true_and_skips_the_false_branch() -> None:
    result = await run_flow(threshold_flow(), {"n": 42})
    assert result.status == "succeeded"
    assert result.outputs == {"big": 42.0}
    assert branch_of(result, "cmp") == "true"
    assert skipped(result) == {"say", "small"}


async def test_compare_routes_false_and_skips_the_true_branch() -> None:
    result = await run_flow(threshold_flow(), {"n": "3"})
    assert result.status == "succeeded"
    assert result.outputs == {"small": "small: 3.0"}
    assert branch_of(result, "cmp") == "false"
    assert skipped(result) == {"big"}


async def test_compare_operand_wired_and_branches_merge() -> None:
    flow = flow_from_tuples(
        [
            ("text", "text_input", {"name": "text"}),
            ("word", "text_input", {"name": "word"}),
            ("cmp", "compare", {"op": "contains", "case_sensitive": False}),
            ("yes", "template", {"template": "found in: {{ t }}"}),
            ("no", "template", {"template": "missing from: {{ t }}"}),
            ("out", "output", {"name": "answer"}),
        ],
        [
            ("text.output", "cmp.value"),
            ("word.output", "cmp.operand"),
            ("cmp.output", "yes.t", "true"),
            ("cmp.output", "no.t", "false"),
            ("yes.output", "out.value"),
            ("no.output", "out.value"),
        ],
    )
    result = await run_flow(flow, {"text": "The Cat sat", "word": "cat"})
    assert result.outputs == {"answer": "found in: The Cat sat"}
    assert skipped(result) == {"no"}
    result = await run_flow(flow, {"text": "The Cat sat", "word": "dog"})
    assert result.outputs == {"answer": "missing from: The Cat sat"}
    assert skipped(result) == {"yes"}


async def test_compare_incomparable_fails_the_run() -> None:
    flow = flow_from_tuples(
        [
            ("t", "text_input", {"name": "t"}),
            ("cmp", "compare", {"op": "<", "operand": 5}),
            ("out", "output", {"name": "o"}),
        ],
        [("t.output", "cmp.value"), ("cmp.output", "out.value", "true")],
    )
    result = await run_flow(flow, {"t": "abc"})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "cmp"
    assert result.error.message == (
        "node 'cmp' (compare) failed: ValueError: cannot compare str < int: "
        "'<' needs two numbers or two texts"
    )


def test_compare_edges_need_known_branches() -> None:
    flow = flow_from_tuples(
        [
            ("t", "text_input", {"name": "t"}),
            ("cmp", "compare", {"op": "is_empty"}),
            ("out", "output", {"name": "o"}),
            ("out2", "output", {"name": "o2"}),
        ],
        [
            ("t.output", "cmp.value"),
            ("cmp.output", "out.value", "maybe"),
            ("cmp.output", "out2.value"),
        ],
    )
    codes = {(p.code, p.node) for p in validate(flow, Registry.default()) if p.severity == "error"}
    assert codes == {("unknown_branch", "cmp"), ("missing_branch", "cmp")}


# -- switch: direct ------------------------------------------------------------------------


def test_switch_routes_to_the_matching_case() -> None:
    config = cond.SwitchConfig(cases=["billing", "support"])
    assert cond.switch(config, "support") == Route("support", "support")
    assert cond.switch(config, " billing\n") == Route("billing", " billing\n")
    assert cond.switch(config, "Support") == Route("default", "Support")
    assert cond.switch(config, "sales") == Route("default", "sales")


def test_switch_key_selects_while_value_travels() -> None:
    config = cond.SwitchConfig(cases=["en", "fr"])
    assert cond.switch(config, "Tom", key="fr") == Route("fr", "Tom")
    assert cond.switch(config, "Tom", key="it") == Route("default", "Tom")
    assert cond.switch(config, "en", key=None) == Route("en", "en")


def test_switch_case_insensitive() -> None:
    config = cond.SwitchConfig(cases=["Billing", "support"], case_sensitive=False)
    assert cond.switch(config, "BILLING").branch == "Billing"
    assert cond.switch(config, "Support").branch == "support"


def test_switch_text_of_other_values() -> None:
    config = cond.SwitchConfig(cases=["true", "false", "3", "2.5", "null"])
    assert cond.switch(config, True).branch == "true"
    assert cond.switch(config, False).branch == "false"
    assert cond.switch(config, 3).branch == "3"
    assert cond.switch(config, 3.0).branch == "3"
    assert cond.switch(config, 2.5).branch == "2.5"
    assert cond.switch(config, None).branch == "null"
    assert cond.switch(config, 1).branch == "default"
    value = [1]
    assert cond.switch(config, value) == Route("default", value)


def test_switch_branches_are_cases_and_default() -> None:
    spec = Registry.default().get("switch")
    config = cond.SwitchConfig(cases=["a", "b"])
    assert spec.branch_names(config) == ["a", "b", "default"]


def test_switch_bad_config() -> None:
    def error(data: dict[str, Any]) -> str:
        with pytest.raises(ValidationError) as info:
            cond.SwitchConfig.model_validate(data)
        return str(info.value)

    assert "at least 1 item" in error({"cases": []})
    assert "'default' is the branch for values matching no case" in error({"cases": ["default"]})
    assert "cases: 'a' is given twice" in error({"cases": ["a", "b", "a"]})
    assert "cases: 'A' matches the same values as 'a'" in error(
        {"cases": ["a", "A"], "case_sensitive": False}
    )
    assert "a case cannot be empty" in error({"cases": [" "]})
    assert "has whitespace around it" in error({"cases": [" a"]})
    # different case is fine when matching is case sensitive
    assert cond.SwitchConfig(cases=["a", "A"]).cases == ["a", "A"]


# -- switch: in a flow ---------------------------------------------------------------------


def routing_flow() -> Flow:
    return flow_from_tuples(
        [
            ("topic", "text_input", {"name": "topic"}),
            ("sw", "switch", {"cases": ["billing", "support"]}),
            ("bill", "template", {"template": "billing team: {{ t }}"}),
            ("help", "template", {"template": "support team: {{ t }}"}),
            ("other", "template", {"template": "front desk: {{ t }}"}),
            ("out", "output", {"name": "route"}),
        ],
        [
            ("topic.output", "sw.value"),
            ("sw.output", "bill.t", "billing"),
            ("sw.output", "help.t", "support"),
            ("sw.output", "other.t", "default"),
            ("bill.output", "out.value"),
            ("help.output", "out.value"),
            ("other.output", "out.value"),
        ],
    )


async def test_switch_routes_to_a_named_case_in_a_flow() -> None:
    result = await run_flow(routing_flow(), {"topic": "support"})
    assert result.status == "succeeded"
    assert result.outputs == {"route": "support team: support"}
    assert branch_of(result, "sw") == "support"
    assert skipped(result) == {"bill", "other"}


async def test_switch_routes_to_default_in_a_flow() -> None:
    result = await run_flow(routing_flow(), {"topic": "sales"})
    assert result.status == "succeeded"
    assert result.outputs == {"route": "front desk: sales"}
    assert branch_of(result, "sw") == "default"
    assert skipped(result) == {"bill", "help"}


def test_switch_edge_with_unknown_case_is_reported() -> None:
    flow = flow_from_tuples(
        [
            ("topic", "text_input", {"name": "topic"}),
            ("sw", "switch", {"cases": ["billing"]}),
            ("out", "output", {"name": "o"}),
        ],
        [("topic.output", "sw.value"), ("sw.output", "out.value", "sales")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node) for p in problems] == [("unknown_branch", "sw")]
    assert "(branches: billing, default)" in problems[0].message


def test_switch_bad_config_reported_by_validate() -> None:
    flow = flow_from_tuples(
        [
            ("topic", "text_input", {"name": "topic"}),
            ("sw", "switch", {"cases": ["default"]}),
            ("out", "output", {"name": "o"}),
        ],
        [("topic.output", "sw.value"), ("sw.output", "out.value", "default")],
    )
    problems = [p for p in validate(flow, Registry.default()) if p.severity == "error"]
    assert [(p.code, p.node) for p in problems] == [("invalid_config", "sw")]

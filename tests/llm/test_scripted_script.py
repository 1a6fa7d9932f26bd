"""Scripts of the scripted model: loading, validation errors, matching; token and embedding
helpers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dagwright.llm.scripted import (
    Script,
    ScriptError,
    default_script,
    load_script,
    parse_script,
)
from dagwright.llm.scripted.embedding import hashed_embedding
from dagwright.llm.scripted.tokens import count_tokens, stream_pieces

YAML_SCRIPT = """\
latency_ms: 5
embedding_dimensions: 16
api_key: sekret
models: [scripted, other]
default_reply: "fallback"
rules:
  - name: bonus
    model: "planner*"
    match: "(?i)year-end bonus"
    replies:
      - "first"
      - content: second
        choices: [a, b]
        latency_ms: 100
        finish_reason: length
        usage: {prompt_tokens: 10, completion_tokens: 3}
    cycle: true
  - endpoint: embeddings
    reply: {vectors: [[0.5, 0.5]]}
  - reply: {fault: rate_limit, retry_after: 0.5, message: slow down}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_and_json_scripts_load_the_same(tmp_path: Path) -> None:
    from_yaml = load_script(write(tmp_path, "script.yaml", YAML_SCRIPT))
    as_json = json.dumps(from_yaml.model_dump(exclude_unset=True))
    from_json = load_script(write(tmp_path, "script.json", as_json))
    assert from_json == from_yaml
    assert from_yaml.latency_ms == 5
    assert from_yaml.embedding_dimensions == 16
    assert from_yaml.api_key == "sekret"
    assert from_yaml.default_reply is not None
    assert from_yaml.default_reply.content == "fallback"
    bonus, vectors, limited = from_yaml.rules
    assert [r.name for r in from_yaml.rules] == ["bonus", "rule-1", "rule-2"]
    assert bonus.cycle is True
    assert [reply.content for reply in bonus.sequence] == ["first", "second"]
    second = bonus.sequence[1]
    assert [second.choice(i) for i in range(3)] == ["a", "b", "a"]
    assert (second.latency_ms, second.finish_reason) == (100, "length")
    assert second.usage is not None
    assert (second.usage.prompt_tokens, second.usage.completion_tokens) == (10, 3)
    assert vectors.sequence[0].vectors == [[0.5, 0.5]]
    assert limited.sequence[0].fault == "rate_limit"
    assert limited.sequence[0].retry_after == 0.5


def test_an_empty_script_is_valid_with_defaults() -> None:
    script = Script.model_validate({})
    assert (script.latency_ms, script.embedding_dimensions, script.api_key) == (0, 64, None)
    assert script.models == ["scripted"]
    assert script.default_reply is None
    assert script.rules == []


def test_bad_field_error_names_the_file_and_the_path(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        "rules:\n"
        "  - reply: a\n"
        "  - reply: b\n"
        "  - replies:\n"
        "      - content: x\n"
        "        fault: explode\n",
    )
    with pytest.raises(ScriptError) as caught:
        load_script(path)
    assert caught.value.message == (
        f"{path}: invalid script: rules[2].replies[0].fault: Input should be 'rate_limit', "
        "'server_error', 'hang', 'malformed' or 'bad_request'"
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"rules": [{"reply": "a"}, {"name": "broken", "match": "(unclosed", "reply": "b"}]},
            "rules[1]: rule 'broken': invalid regex '(unclosed' in match: "
            "missing ), unterminated subpattern at position 0",
        ),
        (
            {"rules": [{"match": "x"}]},
            "rules[0]: rule 'rule-0': give either reply or replies (exactly one)",
        ),
        (
            {"rules": [{"reply": "a", "replies": ["b"]}]},
            "rules[0]: rule 'rule-0': give either reply or replies (exactly one)",
        ),
        (
            {"rules": [{"reply": "a", "matches": "x"}]},
            "rules[0].matches: Extra inputs are not permitted",
        ),
        (
            {"rules": [{"name": "x", "reply": "a"}, {"name": "x", "reply": "b"}]},
            "rules[1]: duplicate rule name 'x' (also rules[0])",
        ),
        (
            {"rules": [{"reply": {"content": "a", "retry_after": 2}}]},
            "rules[0].reply: retry_after applies only to fault: rate_limit",
        ),
        (
            {"rules": [{"endpoint": "images", "reply": "a"}]},
            "rules[0].endpoint: Input should be 'chat', 'completions', 'embeddings' or 'any'",
        ),
        ({"latency_ms": -1}, "latency_ms: Input should be greater than or equal to 0"),
        (["not", "a", "mapping"], "a script must be a mapping of settings, not list"),
    ],
)
def test_invalid_scripts_are_explained(data: object, expected: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(data, "demo.yaml")
    assert caught.value.message.removeprefix("demo.yaml: ").removeprefix("invalid script: ") == (
        expected
    )


def test_unreadable_or_unparsable_files(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"script\.txt: a script must be a \.yaml"):
        load_script(write(tmp_path, "script.txt", "{}"))
    with pytest.raises(ScriptError, match=r"broken\.yaml: not valid YAML"):
        load_script(write(tmp_path, "broken.yaml", "rules: [\n"))
    with pytest.raises(ScriptError, match=r"broken\.json: not valid JSON"):
        load_script(write(tmp_path, "broken.json", "{"))
    with pytest.raises(ScriptError, match=r"missing\.yaml: cannot read the script"):
        load_script(tmp_path / "missing.yaml")
    with pytest.raises(ScriptError, match=r"empty\.yaml: a script must be a mapping.*not empty"):
        load_script(write(tmp_path, "empty.yaml", ""))


def test_rules_match_in_order_by_endpoint_model_and_regex() -> None:
    script = Script.model_validate(
        {
            "rules": [
                {"name": "glob", "model": "planner-*", "match": "plan", "reply": "p"},
                {"name": "exact", "model": "judge", "reply": "j"},
                {"name": "embed", "endpoint": "embeddings", "reply": "e"},
                {"name": "legacy", "endpoint": "completions", "reply": "c"},
                {"name": "anything", "endpoint": "any", "match": "^any", "reply": "a"},
                {"name": "rest", "reply": "r"},
            ]
        }
    )

    def found(endpoint: str, model: str, text: str) -> str | None:
        hit = script.find_rule(endpoint, model, text)  # type: ignore[arg-type]
        return None if hit is None else hit[1].name

    assert found("chat", "planner-large", "make a plan") == "glob"
    assert found("chat", "planner-large", "no match here") == "rest"
    assert found("chat", "Planner-large", "make a plan") == "rest"  # globs are case-sensitive
    assert found("chat", "judge", "anything") == "exact"
    assert found("chat", "judge-2", "x") == "rest"
    assert found("embeddings", "m", "text") == "embed"
    assert found("completions", "m", "text") == "legacy"
    assert found("chat", "m", "any text") == "anything"
    assert found("chat", "m", "other") == "rest"
    only_default_endpoints = Script.model_validate({"rules": [{"reply": "r"}]})
    assert only_default_endpoints.find_rule("embeddings", "m", "x") is None
    assert only_default_endpoints.find_rule("completions", "m", "x") is not None
    assert script.model_names() == ["scripted", "judge"]


def test_the_default_script_says_its_answers_are_scripted() -> None:
    script = default_script()
    assert script.default_reply is not None
    text = script.default_reply.content
    assert text.startswith("[scripted reply]")
    assert "dagwright's scripted model" in text
    assert script.rules  # a few illustrative rules
    greeting = script.find_rule("chat", "scripted", "Hello there")
    assert greeting is not None
    assert "scripted" in greeting[1].sequence[0].content


def test_token_estimate() -> None:
    assert [count_tokens(t) for t in ["", "a", "abcd", "abcde", "x" * 400]] == [1, 1, 1, 2, 100]


@pytest.mark.parametrize(
    "text", ["", "one", "two words", "  leading", "trailing  \n", "a\n\nb\tc  d", "日本語 テキスト"]
)
def test_stream_pieces_rebuild_the_text(text: str) -> None:
    pieces = stream_pieces(text)
    assert "".join(pieces) == text
    assert all(pieces)


def test_stream_pieces_are_words_with_their_leading_space() -> None:
    assert stream_pieces("Hello there,  friend!\n") == ["Hello", " there,", "  friend!", "\n"]


def test_hashed_embeddings() -> None:
    vector = hashed_embedding("The quick brown fox", 64)
    assert len(vector) == 64
    assert math.isclose(math.fsum(v * v for v in vector), 1.0)
    assert hashed_embedding("the QUICK brown fox!", 64) == vector
    assert hashed_embedding("a different sentence", 64) != vector
    # No word tokens: the whole text is the one feature, still a unit vector.
    for text in ("", "?!"):
        empty = hashed_embedding(text, 8)
        assert math.isclose(math.fsum(v * v for v in empty), 1.0)
    overlap = sum(
        a * b for a, b in zip(vector, hashed_embedding("quick brown fox", 64), strict=True)
    )
    unrelated = sum(
        a * b for a, b in zip(vector, hashed_embedding("tax rules in spain", 64), strict=True)
    )
    assert overlap > 0.8 > unrelated

"""Replaying a recording through the scripted server: recorded questions get the recorded
answers, in recorded order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from dagwright.llm.scripted import ScriptedServer, ScriptError, script_from_recording


def exchange(
    endpoint: str,
    model: str,
    request: dict[str, Any],
    choices: list[str] | None = None,
    vectors: list[list[float]] | None = None,
    usage: tuple[int, int] = (7, 3),
) -> dict[str, Any]:
    return {
        "endpoint": endpoint,
        "model": model,
        "request": {"model": model, **request},
        "response": {
            "choices": choices or [],
            "vectors": vectors or [],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        },
    }


def chat(model: str, question: str, answer: str, **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]
    return exchange("chat", model, {"messages": messages, **extra}, choices=[answer])


def write_recording(path: Path, exchanges: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in exchanges), encoding="utf-8")
    return path


RECORDING = [
    chat("gpt-x", "What is 2+2?", "4", temperature=0),
    chat("gpt-x", "Name a colour.\nOne word.", "Red"),
    chat("gpt-x", "What is 2+2?", "Four."),
    chat("gpt-y", "What is 2+2?", "IV"),
    exchange(
        "chat",
        "gpt-x",
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "Parts"}]}]},
        choices=["from parts", "second sample"],
        usage=(11, 5),
    ),
    exchange("completions", "legacy", {"prompt": "Once upon"}, choices=[" a time"]),
    exchange(
        "embeddings", "embedder", {"input": ["alpha", "beta"]}, vectors=[[0.6, 0.8], [1.0, 0.0]]
    ),
]


async def test_replay_answers_recorded_questions_in_order(tmp_path: Path) -> None:
    script = script_from_recording(write_recording(tmp_path / "run.jsonl", RECORDING))
    assert script.models == ["gpt-x", "gpt-y", "legacy", "embedder"]
    assert len(script.rules) == 6  # "What is 2+2?" on gpt-x is one rule with two replies

    with ScriptedServer(script) as server:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key="x", max_retries=0
        ) as client:

            async def ask(model: str, question: str, n: int = 1) -> list[str | None]:
                messages: Any = [{"role": "user", "content": question}]
                done = await client.chat.completions.create(model=model, messages=messages, n=n)
                return [choice.message.content for choice in done.choices]

            assert await ask("gpt-x", "What is 2+2?") == ["4"]
            assert await ask("gpt-y", "What is 2+2?") == ["IV"]
            assert await ask("gpt-x", "What is 2+2?") == ["Four."]
            assert await ask("gpt-x", "What is 2+2?") == ["Four."]  # the last one repeats
            assert await ask("gpt-x", "Name a colour.\nOne word.") == ["Red"]
            assert await ask("gpt-x", "Parts", n=2) == ["from parts", "second sample"]

            recorded_usage = await client.chat.completions.create(
                model="gpt-x", messages=[{"role": "user", "content": "Parts"}]
            )
            assert recorded_usage.usage is not None
            assert recorded_usage.usage.prompt_tokens == 11
            assert recorded_usage.usage.completion_tokens == 5

            legacy = await client.completions.create(model="legacy", prompt="Once upon")
            assert legacy.choices[0].text == " a time"

            vectors = await client.embeddings.create(
                model="embedder", input=["alpha", "beta"], encoding_format="float"
            )
            assert [item.embedding for item in vectors.data] == [[0.6, 0.8], [1.0, 0.0]]

            # Only the exact recorded text and model replay.
            for model, question in [
                ("gpt-x", "What is 2+2"),
                ("gpt-x", "What is 2+2?\n"),
                ("gpt-z", "What is 2+2?"),
            ]:
                with pytest.raises(openai.BadRequestError, match="no scripted reply matches"):
                    await ask(model, question)


def test_a_question_with_regex_characters_replays_literally(tmp_path: Path) -> None:
    question = "Is (a+b)* [x] ^$ valid?"
    script = script_from_recording(
        write_recording(tmp_path / "run.jsonl", [chat("m", question, "yes")])
    )
    assert script.find_rule("chat", "m", question) is not None
    assert script.find_rule("chat", "m", "Is aab valid?") is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "line 2: not valid JSON"),
        (
            json.dumps(exchange("images", "m", {"prompt": "cat"})),
            "line 2: endpoint: Input should be 'chat', 'completions' or 'embeddings'",
        ),
        (json.dumps({"endpoint": "chat", "model": "m"}), "line 2: request: Field required"),
        (
            json.dumps(exchange("chat", "m", {"messages": []}, choices=["x"])),
            "line 2: request.messages should be a non-empty list of messages",
        ),
        (
            json.dumps(exchange("embeddings", "m", {"input": "x"})),
            "line 2: response.vectors is empty for an embeddings exchange",
        ),
    ],
)
def test_bad_lines_are_named(tmp_path: Path, line: str, expected: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(chat("m", "q", "a")) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(ScriptError) as caught:
        script_from_recording(path)
    assert caught.value.message.startswith(f"{path}, {expected}")


def test_a_missing_recording_is_a_script_error(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read the recording"):
        script_from_recording(tmp_path / "absent.jsonl")

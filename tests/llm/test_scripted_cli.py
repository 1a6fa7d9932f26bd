"""`mock_llm`, the command serving the scripted model: its errors through typer's runner, and
a real server process answering the real `openai` client."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import typer
from typer.testing import CliRunner

from dagwright.cli.mock_llm import mock_llm

app = typer.Typer()
app.command()(mock_llm)
runner = CliRunner()

SERVE = "import typer; from dagwright.cli.mock_llm import mock_llm; typer.run(mock_llm)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_bad_script_exits_2_naming_the_field(tmp_path: Path) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text("rules:\n  - reply: {fault: explode}\n", encoding="utf-8")
    result = runner.invoke(app, ["--script", str(script)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {script}: invalid script: rules[0].reply.fault:")
    assert result.stdout == ""


def test_script_and_replay_together_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["--script", str(tmp_path / "a.yaml"), "--replay", str(tmp_path / "b.jsonl")]
    )
    assert result.exit_code == 2
    assert result.stderr == "error: give --script or --replay, not both\n"


def test_a_bad_recording_exits_2(tmp_path: Path) -> None:
    recording = tmp_path / "run.jsonl"
    recording.write_text('{"endpoint": "images"}\n', encoding="utf-8")
    result = runner.invoke(app, ["--replay", str(recording)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {recording}, line 1: ")


def test_serves_a_script_until_interrupted(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default_reply": "scripted hello"}), encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE, "--script", str(script), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(f"{base_url}/models", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.05)
        client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
        completion = client.chat.completions.create(
            model="anything", messages=[{"role": "user", "content": "hi"}]
        )
        client.close()
        assert completion.choices[0].message.content == "scripted hello"
        assert completion.system_fingerprint == "dagwright-scripted"
    finally:
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=10)
    assert stdout.splitlines()[0] == (
        f"scripted model server on http://127.0.0.1:{port}/v1 — answers are scripted, not a model's"
    )

"""`dagwright run` exports its run's trace when a collector is configured, under the
TRACEPARENT variable's span, before the command exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from otlp_receiver import otlp_collector

from support.server import EXAMPLES, subprocess_environment

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def test_a_cli_run_is_exported_under_the_traceparent_variable(tmp_path: Path) -> None:
    with otlp_collector() as collector:
        env = subprocess_environment(
            DAGWRIGHT_OTLP_ENDPOINT=collector.url, TRACEPARENT=f"00-{TRACE_ID}-{PARENT}-01"
        )
        done = subprocess.run(
            [sys.executable, "-m", "dagwright", "run", str(EXAMPLES / "hello.json"), "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        # No waiting: the command flushed its spans before it exited.
        spans = collector.spans
    run = next(s for s in spans if s.name == "run hello")
    assert run.attributes["dagwright.run.id"] == run_id
    assert run.attributes["dagwright.run.mode"] == "cli"
    assert (run.trace_id, run.parent_span_id) == (TRACE_ID, PARENT)
    nodes = {s.name: s for s in spans if s.parent_span_id == run.span_id}
    assert set(nodes) == {"node name", "node greet", "node greeting"}
    assert nodes["node greet"].attributes["dagwright.block"] == "template"


def test_without_a_collector_the_cli_does_not_load_opentelemetry(tmp_path: Path) -> None:
    script = (
        "import sys, runpy; sys.argv = ['dagwright', 'run', sys.argv[1]];\n"
        "try:\n    runpy.run_module('dagwright', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + script, str(EXAMPLES / "hello.json")],
        env=subprocess_environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"

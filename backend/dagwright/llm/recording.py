"""Recording every model exchange of a run to a JSONL file, so that a later run can replay
them against the scripted server (`dagwright run --replay FILE`) and get the same outputs.

One exchange per line:
    {"endpoint": "chat" | "completions" | "embeddings", "model": str,
     "request": {"messages" | "prompt" | "input": ..., other parameters},
     "response": {"choices": [str], "vectors": [[float]], "usage": {...}}}
API keys are never part of a request as recorded: they travel in headers, not here.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any


class Recorder:
    """Appends exchanges to a file; safe to share between runs and threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(
        self,
        endpoint: str,
        model: str,
        request: dict[str, Any],
        choices: list[str],
        vectors: list[list[float]],
        prompt_tokens: int,
        completion_tokens: int,
    ) -> None:
        record = {
            "endpoint": endpoint,
            "model": model,
            "request": request,
            "response": {
                "choices": choices,
                "vectors": vectors,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
            },
        }
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)

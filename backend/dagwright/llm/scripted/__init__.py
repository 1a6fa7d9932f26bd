"""dagwright's scripted model: a real HTTP server speaking OpenAI's API, answering from a
script (or a recording) instead of a model, and saying so in every answer.

- `script`: the script format (documented there), loading and rule matching.
- `server`: the FastAPI app (`create_app`).
- `runner`: `ScriptedServer`, the server on a thread for tests and in-process use.
- `replay`: scripts built from recordings of real runs.
"""

from dagwright.llm.scripted.replay import script_from_recording
from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import (
    Reply,
    Rule,
    Script,
    ScriptError,
    default_script,
    default_script_path,
    load_script,
    parse_script,
)
from dagwright.llm.scripted.server import create_app
from dagwright.llm.scripted.state import Stats

__all__ = [
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "ScriptedServer",
    "Stats",
    "create_app",
    "default_script",
    "default_script_path",
    "load_script",
    "parse_script",
    "script_from_recording",
]

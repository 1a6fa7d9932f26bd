"""Jinja2 templates for prompts, texts and URLs, always rendered in a sandbox.

The immutable sandbox refuses attributes starting with an underscore (no reaching Python
internals through `''.__class__`) and methods that change a value in place (values arriving
at a port may be shared with other nodes). Undefined variables are errors, not empty text.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import StrictUndefined, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

SANDBOX = ImmutableSandboxedEnvironment(
    undefined=StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)


@lru_cache(maxsize=512)
def compile_template(text: str) -> jinja2.Template:
    return SANDBOX.from_string(text)


@lru_cache(maxsize=512)
def template_variables(text: str) -> tuple[str, ...]:
    """The variables a template reads (its input ports), sorted."""
    names = meta.find_undeclared_variables(SANDBOX.parse(text))
    return tuple(sorted(name for name in names if name not in SANDBOX.globals))


def variables_of(texts: Iterable[str]) -> list[str]:
    """The variables several templates read together, sorted."""
    return sorted({name for text in texts for name in template_variables(text)})


def check_template(text: str, field: str = "template") -> str:
    """For pydantic validators: the text when it parses, else a ValueError naming the line."""
    try:
        compile_template(text)  # also warms the cache the runs use
    except jinja2.TemplateSyntaxError as exc:
        message = exc.message or str(exc)
        lines = text.splitlines()
        source = ""
        if exc.lineno and exc.lineno <= len(lines):
            source = f" (line {exc.lineno} reads: {lines[exc.lineno - 1].strip()[:80]!r})"
        raise ValueError(f"{field} does not parse: line {exc.lineno}: {message}{source}") from None
    return text


def render(text: str, variables: dict[str, Any], what: str = "template") -> str:
    """Render a template; every failure becomes a ValueError that says what went wrong."""
    try:
        return compile_template(text).render(**variables)
    except jinja2.exceptions.SecurityError as exc:
        raise ValueError(f"{what}: refused by the sandbox: {exc}") from None
    except jinja2.UndefinedError as exc:
        raise ValueError(f"{what}: undefined value: {exc}") from None
    except Exception as exc:
        raise ValueError(f"{what} failed to render: {type(exc).__name__}: {exc}") from None

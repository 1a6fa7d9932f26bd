"""Reading `--input key=value` options (key=@path reads the value from a file)."""

from __future__ import annotations

from pathlib import Path

import typer


def fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def parse_inputs(pairs: list[str]) -> dict[str, str]:
    inputs: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"--input {pair!r}: expected key=value (or key=@file)")
        if value.startswith("@"):
            try:
                value = Path(value[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise fail(f"--input {key}: cannot read {value[1:]}: {exc.strerror}") from None
        inputs[key] = value
    return inputs

"""The registry of the blocks the method flows use, built from their modules alone so these
tests do not depend on unrelated block modules."""

from __future__ import annotations

import importlib

import pytest

from dagwright.registry import Registry

MODULES = ("input", "llm", "iteration", "chain_of_table", "mac_sql")


@pytest.fixture(scope="session")
def registry() -> Registry:
    return Registry.from_modules(
        importlib.import_module(f"dagwright.blocks.{name}") for name in MODULES
    )

"""The registry: loading, checking at start-up, and the JSON Schema the editor reads."""

from __future__ import annotations

import re
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from dagwright.errors import (
    BlockConfigError,
    BlockDefinitionError,
    RegistryError,
    UnknownBlockError,
)
from dagwright.registry import NodeContext, Registry, Route, block
from dagwright.settings import load_settings


class Config(BaseModel):
    names: list[str] = []


def _names(config: Config) -> list[str]:
    return config.names


def test_builtin_library_loads_every_category_module() -> None:
    registry = Registry.default(extra_paths=[])
    assert {"text_input", "output", "template", "compare", "switch"} <= {s.name for s in registry}
    assert registry.get("text_input").module == "dagwright.blocks.input"
    with pytest.raises(UnknownBlockError, match="unknown block 'nope'"):
        registry.get("nope")


def test_ports_come_from_annotations() -> None:
    @block("demo", category="data_process", description="Demo.", example="x")
    async def demo(config: Config, ctx: NodeContext, text: str, count: int = 3) -> list[str]:
        """Demo block."""
        return [text] * count

    spec = demo.__dagwright_block__
    assert spec.mode == "async"
    assert spec.context_param == "ctx"
    assert spec.config_model is Config
    assert [(p.name, p.required, p.default) for p in spec.inputs.values()] == [
        ("text", True, None),
        ("count", False, 3),
    ]
    schema = spec.to_schema()
    assert schema["inputs"][0]["type"] == "str"
    assert schema["inputs"][1] == {
        "name": "count",
        "type": "int",
        "schema": {"type": "integer"},
        "required": False,
        "description": "",
        "default": 3,
    }
    assert schema["outputs"] == [
        {
            "name": "output",
            "type": "list[str]",
            "schema": {"items": {"type": "string"}, "type": "array"},
            "required": True,
            "description": "",
        }
    ]
    assert schema["config_schema"]["properties"]["names"]["type"] == "array"
    assert schema["doc"] == "Demo block."


def test_dynamic_ports_and_conditions() -> None:
    @block("dyn", category="data_process", description="Dyn.", dynamic_ports=_names, inline=True)
    def dyn(config: Config, **values: int) -> int:
        """Sums."""
        return sum(values.values())

    @block("cond", category="condition", description="Cond.", branches=("a", "b"), inline=True)
    def cond(x: str) -> Route[str]:
        """Routes."""
        return Route("a", x)

    spec = dyn.__dagwright_block__
    ports = spec.input_ports(Config(names=["p", "q"]))
    assert list(ports) == ["p", "q"]
    assert spec.to_schema()["dynamic_inputs"]["type"] == "int"
    cond_spec = cond.__dagwright_block__
    assert cond_spec.is_condition
    assert cond_spec.to_schema()["branches"] == ["a", "b"]
    assert cond_spec.outputs["output"].type is str


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "def f(x: set[int]) -> int:\n    '''d'''\n    return 1",
            "input 'x': set[int] is not a supported port type",
        ),
        ("def f(x) -> int:\n    '''d'''\n    return 1", "parameter 'x' has no type annotation"),
        ("def f(x: int):\n    '''d'''\n    return 1", "the return annotation is missing"),
        ("def f(x: int) -> int:\n    return 1", "a docstring is required"),
        ("def f(x: dict[int, str]) -> int:\n    '''d'''\n    return 1", "dict keys must be str"),
        (
            "def f(config: int) -> int:\n    '''d'''\n    return 1",
            "must be annotated with a pydantic",
        ),
        ("def f(x: int) -> Route[int]:\n    '''d'''\n    return 1", "declares branches="),
    ],
)
def test_bad_declarations_name_the_function(source: str, message: str) -> None:
    namespace: dict[str, Any] = {"Route": Route, "__name__": "user_module"}
    exec(compile(source, "user_module.py", "exec"), namespace)
    with pytest.raises(
        BlockDefinitionError,
        match=re.escape("block function user_module.f: ") + ".*" + re.escape(message),
    ):
        block("f", category="data_process", description="d")(namespace["f"])


def test_bad_category_and_description() -> None:
    def f(x: int) -> int:
        """d"""
        return x

    with pytest.raises(BlockDefinitionError, match="category 'magic'"):
        block("f", category="magic", description="d")(f)  # type: ignore[arg-type]
    with pytest.raises(BlockDefinitionError, match="description must be one non-empty line"):
        block("f", category="tool", description="")(f)


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(textwrap.dedent(source), module.__dict__)
    return module


BLOCK_SOURCE = """
from dagwright.registry import block

@block("same_name", category="tool", description="One.", inline=True)
def one(x: int) -> int:
    '''One.'''
    return x
"""


def test_duplicate_names_name_both_modules() -> None:
    first = _module("pkg.first", BLOCK_SOURCE)
    second = _module("pkg.second", BLOCK_SOURCE)
    with pytest.raises(
        RegistryError, match=r"'same_name' is declared twice: in pkg\.first and in pkg\.second"
    ):
        Registry.from_modules([first, second])


def test_user_block_folder_loads_without_other_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shout.py").write_text(
        textwrap.dedent('''
        from dagwright.registry import block

        @block("user_shout", category="tool", description="Shout.", inline=True)
        def shout(text: str) -> str:
            """Upper-cases text and adds an exclamation mark."""
            return text.upper() + "!"
    ''')
    )
    monkeypatch.setenv("DAGWRIGHT_BLOCKS_PATH", str(tmp_path))
    registry = Registry.default(load_settings().block_folders)
    assert registry.get("user_shout").fn(text="hi") == "HI!"
    assert "text_input" in registry


def test_broken_user_module_is_named(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(
        textwrap.dedent('''
        from dagwright.registry import block

        @block("broken", category="tool", description="Broken.")
        def broken(x: frozenset[int]) -> int:
            """Doc."""
            return 1
    ''')
    )
    (tmp_path / "crash.py").write_text("raise RuntimeError('import went wrong')\n")
    with pytest.raises(RegistryError) as info:
        Registry.default(extra_paths=[tmp_path])
    message = info.value.message
    assert f"blocks module {tmp_path / 'broken.py'}: block function" in message
    assert "frozenset[int] is not a supported port type" in message
    assert f"blocks module {tmp_path / 'crash.py'}: RuntimeError: import went wrong" in message


def test_missing_user_folder_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="which is not a folder"):
        Registry.default(extra_paths=[tmp_path / "absent"])


def test_registry_schema_covers_every_block() -> None:
    schema = Registry.default(extra_paths=[]).to_schema()
    assert schema["categories"] == ["input", "data_process", "condition", "llm", "invoke", "tool"]
    for entry in schema["blocks"]:
        assert entry["description"]
        assert entry["doc"]
        assert entry["config_schema"]["type"] == "object"
        for port in entry["inputs"] + entry["outputs"]:
            assert isinstance(port["type"], str)
            assert isinstance(port["schema"], dict)


def test_dynamic_ports_may_not_shadow_the_config_or_declared_ports() -> None:
    @block("shadow", category="data_process", description="Shadow.", dynamic_ports=_names)
    async def shadow(config: Config, fixed: int, **values: int) -> int:
        """Sums."""
        return fixed + sum(values.values())

    spec = shadow.__dagwright_block__
    for taken in ("config", "fixed"):
        with pytest.raises(BlockConfigError, match=f"port name '{taken}' is reserved"):
            spec.input_ports(Config(names=["a", taken]))
    with pytest.raises(BlockConfigError, match="not an identifier"):
        spec.input_ports(Config(names=["two words"]))

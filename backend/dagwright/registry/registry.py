"""The block registry: finds blocks in the built-in library (dagwright.blocks, the top-level
blocks/ folder) and in the folders it is given (DAGWRIGHT_BLOCKS_PATH), checks them, and
exports their JSON Schema for the editor.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from dagwright.errors import DagwrightError, RegistryError, UnknownBlockError
from dagwright.registry.block import CATEGORIES, BlockSpec, spec_of

BUILTIN_PACKAGE = "dagwright.blocks"


class Registry:
    """Blocks by name. Built once at start-up; every problem found is reported together."""

    def __init__(self, specs: Iterable[BlockSpec] = ()) -> None:
        self._blocks: dict[str, BlockSpec] = {}
        problems: list[str] = []
        for spec in specs:
            known = self._blocks.get(spec.name)
            if known is not None and known.fn is not spec.fn:
                problems.append(
                    f"block name {spec.name!r} is declared twice: "
                    f"in {known.module} and in {spec.module}"
                )
                continue
            self._blocks[spec.name] = spec
        if problems:
            raise RegistryError("; ".join(problems))

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType]) -> Registry:
        return cls(spec for module in modules for spec in _specs_in(module))

    @classmethod
    def default(cls, extra_paths: Iterable[str | Path] = ()) -> Registry:
        """The built-in library plus every folder of extra_paths (the process's: the
        settings' DAGWRIGHT_BLOCKS_PATH)."""
        modules = list(_builtin_modules())
        problems: list[str] = []
        for folder in extra_paths:
            modules.extend(_folder_modules(Path(folder), problems))
        if problems:
            raise RegistryError("; ".join(problems))
        return cls.from_modules(modules)

    def extended(self, specs: Iterable[BlockSpec]) -> Registry:
        """This registry plus blocks made at run time (registry/dynamic.py); a name taken
        twice is reported as for modules."""
        return Registry([*self._blocks.values(), *specs])

    def __contains__(self, name: object) -> bool:
        return name in self._blocks

    def __iter__(self) -> Iterator[BlockSpec]:
        return iter(sorted(self._blocks.values(), key=lambda s: (s.category, s.name)))

    def __len__(self) -> int:
        return len(self._blocks)

    def get(self, name: str) -> BlockSpec:
        try:
            return self._blocks[name]
        except KeyError:
            raise UnknownBlockError(f"unknown block {name!r}") from None

    def find(self, name: str) -> BlockSpec | None:
        return self._blocks.get(name)

    def to_schema(self) -> dict[str, Any]:
        """Every block's JSON Schema, grouped as the editor's palette shows them."""
        return {
            "categories": list(CATEGORIES),
            "blocks": [spec.to_schema() for spec in self],
        }


def _specs_in(module: ModuleType) -> list[BlockSpec]:
    specs: list[BlockSpec] = []
    for value in vars(module).values():
        spec = spec_of(value)
        # A block imported from another module is registered where it is defined.
        if spec is not None and spec.module == module.__name__:
            specs.append(spec)
    return specs


def _builtin_modules() -> Iterator[ModuleType]:
    package = importlib.import_module(BUILTIN_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        name = f"{BUILTIN_PACKAGE}.{info.name}"
        try:
            yield importlib.import_module(name)
        except DagwrightError as exc:
            raise RegistryError(f"blocks module {name}: {exc.message}") from exc


def _folder_modules(folder: Path, problems: list[str]) -> list[ModuleType]:
    """Import every .py file of a user's block folder under a private, stable module name."""
    if not folder.is_dir():
        problems.append(f"DAGWRIGHT_BLOCKS_PATH names {folder}, which is not a folder")
        return []
    modules = []
    digest = hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:8]
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        name = f"dagwright_user_blocks_{digest}.{path.stem}"
        if name in sys.modules:
            modules.append(sys.modules[name])
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            problems.append(f"blocks module {path}: cannot be imported")
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except DagwrightError as exc:
            del sys.modules[name]
            problems.append(f"blocks module {path}: {exc.message}")
            continue
        except Exception as exc:
            del sys.modules[name]
            problems.append(f"blocks module {path}: {type(exc).__name__}: {exc}")
            continue
        modules.append(module)
    return modules

"""A Data-Copilot interface (Zhang et al., "Data-Copilot", section 2.1): a code module with a
name, a description, typed inputs and a table output, whose Python code runs in dagwright's
sandbox (dagwright.data.sandbox) over the data source's tables.

The code defines one function named as the interface. Its parameters are, by name, the
DataFrames of the tables it reads (`tables`, qualified names; the parameter is the last part:
`pg.billing.daily_billing` -> `daily_billing`) and its inputs; an input of type `table`
receives an earlier result as a DataFrame. It returns a DataFrame:

    def cost_by_service(daily_billing, start_date, end_date):
        rows = daily_billing[(daily_billing.billing_date >= start_date) & ...]
        return rows.groupby("service", as_index=False)["cost_usd"].sum()
"""

from __future__ import annotations

import datetime
import keyword
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    import pyarrow as pa

    from dagwright.data.engine import QueryEngine
    from dagwright.data.isolation import SandboxSettings

InputType = Literal["str", "int", "float", "bool", "date", "list", "table"]
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class InterfaceError(DagwrightError):
    """An interface cannot be called as asked: a bad argument, or code that fails or does
    not return a table (the message carries the sandbox's error)."""

    code = "interface_failed"


class InterfaceInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_IDENTIFIER.pattern)
    type: InputType = "str"
    description: str = ""
    # A merged interface keeps each original's behaviour through a parameter with a default
    # (the paper's "use parameters to control the different inputs"), so the originals'
    # test cases still call it.
    default: Any = None


class Interface(BaseModel):
    """What the model designs and the library stores. `tests` are argument sets the design
    phase ran it with (the paper's generated test requests, as calls)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=_IDENTIFIER.pattern)
    description: str
    inputs: list[InterfaceInput] = Field(default_factory=list)
    tables: list[str] = Field(default_factory=list, description="Qualified names it reads.")
    code: str
    tests: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _not_a_keyword(cls, name: str) -> str:
        if keyword.iskeyword(name):
            raise ValueError(f"{name!r} is a Python keyword")
        return name

    def table_parameters(self) -> dict[str, str]:
        """Parameter name -> qualified table name."""
        return {qualified.split(".")[-1]: qualified for qualified in self.tables}

    def signature(self) -> str:
        """As the palette and the planning prompt show it: `name(a: date, b: str) -> table`."""
        inputs = ", ".join(
            f"{i.name}: {i.type}" + ("" if i.default is None else f" = {i.default!r}")
            for i in self.inputs
        )
        return f"{self.name}({inputs}) -> table"


def _scalar(value: Any, spec: InterfaceInput) -> Any:
    if spec.type == "int" and isinstance(value, int | float | str) and not isinstance(value, bool):
        return int(value)
    if (
        spec.type == "float"
        and isinstance(value, int | float | str)
        and not isinstance(value, bool)
    ):
        return float(value)
    if spec.type == "bool" and isinstance(value, bool):
        return value
    if spec.type == "date" and isinstance(value, str):
        # Dates reach the code as ISO strings; refuse what is not one before the code runs.
        return datetime.date.fromisoformat(value[:10]).isoformat()
    if spec.type == "str" and isinstance(value, str | int | float):
        return str(value)
    if spec.type == "list" and isinstance(value, list):
        return value
    raise InterfaceError(f"argument {spec.name!r} should be a {spec.type}, not {value!r}")


def bind(interface: Interface, args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits and checks arguments: (scalars, tables given as arguments). Unknown or missing
    arguments are refused by name."""
    known = {spec.name: spec for spec in interface.inputs}
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise InterfaceError(f"{interface.name} has no input {', '.join(map(repr, unknown))}")
    args = {
        **{s.name: s.default for s in interface.inputs if s.default is not None},
        **args,
    }
    missing = sorted(set(known) - set(args))
    if missing:
        raise InterfaceError(f"{interface.name} needs {', '.join(map(repr, missing))}")
    scalars: dict[str, Any] = {}
    tables: dict[str, Any] = {}
    for name, value in args.items():
        spec = known[name]
        if spec.type == "table":
            tables[name] = value
        else:
            try:
                scalars[name] = _scalar(value, spec)
            except ValueError as exc:
                raise InterfaceError(f"argument {name!r}: {exc}") from None
    return scalars, tables


def program(interface: Interface, scalars: Mapping[str, Any], table_names: list[str]) -> str:
    """The code the sandbox runs: the interface's code, then the call. The arguments are a
    Python literal (JSON values only), so nothing is imported to read them."""
    passed = [f"{name}={name}" for name in table_names] + ["**__dc_args"]
    return (
        f"{interface.code}\n\n__dc_args = {dict(scalars)!r}\n"
        f"result = {interface.name}({', '.join(passed)})\n"
    )


def call(
    interface: Interface,
    args: Mapping[str, Any],
    engine: QueryEngine,
    sandbox: SandboxSettings,
    *,
    sample_rows: int | None = None,
    max_rows: int = 100_000,
) -> pa.Table:
    """Runs the interface once. Its tables are read through the query engine — whole (up to
    `max_rows`), or the first `sample_rows` rows when testing on sub-tables — and table
    arguments are records or Arrow tables. Blocks the calling thread."""
    import pyarrow as pa

    from dagwright.data.sandbox import run_python
    from dagwright.errors import SandboxError

    scalars, given = bind(interface, args)
    frames: dict[str, pa.Table] = {}
    for parameter, qualified in interface.table_parameters().items():
        if sample_rows is not None:
            frames[parameter] = engine.sample(qualified, sample_rows).table
        else:
            frames[parameter] = engine.query(f"SELECT * FROM {qualified}", max_rows=max_rows).table
    for name, value in given.items():
        frames[name] = value if isinstance(value, pa.Table) else records_table(value, name)
    try:
        outcome = run_python(program(interface, scalars, list(frames)), frames, settings=sandbox)
    except SandboxError as exc:
        raise InterfaceError(f"{interface.name}: {exc.message}") from exc
    if not isinstance(outcome.result, pa.Table):
        raise InterfaceError(
            f"{interface.name} returned {type(outcome.result).__name__}, not a table"
        )
    return outcome.result


def records_table(value: Any, name: str) -> pa.Table:
    import pyarrow as pa

    if isinstance(value, list) and all(isinstance(row, dict) for row in value):
        return pa.Table.from_pylist(value)
    raise InterfaceError(f"argument {name!r} should be a table (a list of records)")


def table_records(table: pa.Table) -> list[dict[str, Any]]:
    """A result as JSON-ready records (dates as ISO text, decimals as floats), as runs keep
    and charts take them."""
    from dagwright.data.engine import json_value

    columns = [column.to_pylist() for column in table.columns]
    return [
        {
            name: json_value(values[row])
            for name, values in zip(table.column_names, columns, strict=True)
        }
        for row in range(table.num_rows)
    ]

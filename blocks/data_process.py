"""Data processing blocks: templates, text, JSON, regular expressions and lists. Pure
functions of their inputs; none of them calls out of the process.

Templates render in the bounded sandbox of dagwright.templating; regular expressions, those
of the regex blocks and the `=~` of JSONPath filters, run on RE2 (dagwright.safe_regex), in
time linear in the text."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dagwright.registry import block
from dagwright.safe_regex import (
    DOTALL,
    IGNORECASE,
    INLINE_WORK,
    MULTILINE,
    UserMatch,
    UserRegex,
)
from dagwright.safe_regex import compile_user_regex as compile_regex
from dagwright.templating import check_template, render, template_variables

if TYPE_CHECKING:
    from jsonpath_ng.jsonpath import JSONPath

# -- template ------------------------------------------------------------------------------


class TemplateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    template: str = Field(
        description="A Jinja2 template; each variable it uses, such as {{ question }}, "
        "becomes an input port."
    )

    @field_validator("template")
    @classmethod
    def _parses(cls, text: str) -> str:
        return check_template(text)


def _template_ports(config: TemplateConfig) -> list[str]:
    return list(template_variables(config.template))


@block(
    "template",
    category="data_process",
    description="Render a Jinja2 template; its variables are the input ports.",
    example="'Answer {{ question }} in {{ lang }}.' with question, lang -> text",
    dynamic_ports=_template_ports,
    # Not inline: a template's loops may do real work, which must not hold up the event loop.
)
def template(config: TemplateConfig, **variables: Any) -> str:
    """Renders a Jinja2 template. Every variable the template uses (`{{ question }}`,
    `{% for row in rows %}`) is an input port of the same name, so wire one edge into each.

    Filters, loops and conditions work as in Jinja2; `{{ value | tojson }}` writes a value as
    JSON. The template runs in a sandbox: attributes starting with an underscore and methods
    that modify a value are refused, and a variable or attribute that does not exist is an
    error rather than empty text. The text is rendered exactly as written, trailing newline
    included.

    The sandbox also bounds what one render may cost (dagwright.templating.TemplateLimits):
    about 4,000,000 characters of output or of any text built, 100,000 items in a list or
    range, integers of 10,000 bits, 1,000,000 steps (loop iterations, calls, operations) and
    0.25 s of CPU, macros nested 50 deep. Past a limit the node fails with the code
    `template_limit` and a message naming the limit."""
    return render(config.template, variables)


# -- text ----------------------------------------------------------------------------------


class TextJoinConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    separator: str = Field("\n", description="Put between each two texts.")


@block(
    "text_join",
    category="data_process",
    description="Join texts into one, with a separator between them.",
    example="['a', 'b'] with separator ', ' -> 'a, b'",
    inline=True,
)
def text_join(config: TextJoinConfig, texts: list[str]) -> str:
    """Joins a list of texts into one text, putting the separator (a newline unless set)
    between each two. An empty list gives an empty text."""
    return config.separator.join(texts)


class TextSplitConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    separator: str = Field("\n", min_length=1, description="Split the text where this occurs.")
    strip: bool = Field(True, description="Remove whitespace around each part.")
    drop_empty: bool = Field(True, description="Leave out parts that are empty (after strip).")
    max_split: int | None = Field(
        None, ge=0, description="Split at most this many times (counted from the start)."
    )


@block(
    "text_split",
    category="data_process",
    description="Split a text into a list of texts at a separator.",
    example="'a, b,, c' with separator ',' -> ['a', 'b', 'c']",
    inline=True,
)
def text_split(config: TextSplitConfig, text: str) -> list[str]:
    """Splits a text into parts at each occurrence of the separator (a newline unless set).
    By default each part is stripped of surrounding whitespace and empty parts are left out,
    so a text with blank lines gives just its non-blank lines. With `max_split`, the text is
    split at most that many times and the last part holds the rest."""
    parts = text.split(config.separator, -1 if config.max_split is None else config.max_split)
    if config.strip:
        parts = [part.strip() for part in parts]
    if config.drop_empty:
        parts = [part for part in parts if part]
    return parts


# -- regular expressions --------------------------------------------------------------------

RegexFlag = Literal["IGNORECASE", "MULTILINE", "DOTALL"]

_FLAGS: dict[RegexFlag, int] = {
    "IGNORECASE": IGNORECASE,
    "MULTILINE": MULTILINE,
    "DOTALL": DOTALL,
}


def _regex_flags(names: list[RegexFlag]) -> int:
    flags = 0
    for name in names:
        flags |= _FLAGS[name]
    return flags


class RegexConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(
        description="A regular expression in Python's syntax, run in linear time (RE2): "
        "no backreferences or lookaround."
    )
    group: int | str = Field(
        0, description="The group to return: 0 for the whole match, a number or a group's name."
    )
    flags: list[RegexFlag] = Field(
        default_factory=list, description="IGNORECASE, MULTILINE and/or DOTALL."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        compile_regex(pattern, label="pattern")  # a RegexError (a ValueError) names the problem
        return pattern

    @field_validator("group")
    @classmethod
    def _group_number(cls, group: int | str) -> int | str:
        # A form may send a number as text; a group name cannot start with a digit.
        if isinstance(group, str) and group.isdigit():
            return int(group)
        return group

    @model_validator(mode="after")
    def _group_exists(self) -> RegexConfig:
        compiled = self.compiled()
        if isinstance(self.group, int):
            if not 0 <= self.group <= compiled.groups:
                raise ValueError(
                    f"group {self.group} does not exist: the pattern has {compiled.groups} group(s)"
                )
        elif self.group not in compiled.groupindex:
            names = ", ".join(compiled.groupindex) or "none"
            raise ValueError(f"group {self.group!r} does not exist (named groups: {names})")
        return self

    def compiled(self) -> UserRegex:
        return compile_regex(self.pattern, _regex_flags(self.flags), label="pattern")


def _group_text(match: UserMatch, group: int | str) -> str:
    found = match.group(group)
    return found if found is not None else ""


@block(
    "regex_extract",
    category="data_process",
    description="The first match of a regular expression in a text, or None.",
    example=r"pattern 'order #(\d+)', group 1: 'see order #42' -> '42'",
    # Always in a worker thread (where RE2 releases the GIL): matching is linear in the text,
    # which may be long, so the executor must not move the block onto the event loop.
    blocking=True,
)
def regex_extract(config: RegexConfig, text: str) -> str | None:
    """Searches the text for the pattern and returns the chosen group of the first match
    (the whole match unless `group` is set), or None when the pattern does not occur. A
    group that took no part in the match gives an empty text.

    Patterns are written in Python's syntax (flags, numbered and named groups as in Python's
    `re`) but run on RE2, in time linear in the text: backreferences (`\\1`), lookahead and
    lookbehind, atomic groups and possessive quantifiers are refused when the flow is saved
    (code `regex_unsupported`), and a counted repetition allows at most 1,000. `\\d`, `\\w`
    and `\\s` match Unicode digits, word characters and spaces as in Python, but `\\b` and
    `\\B` see only ASCII letters, digits and `_` as word characters. The text may be at most
    100,000,000 characters divided by the pattern's positions (its atoms, counted repeats
    expanded: `a.{30}c` has 32); past that the node fails with `regex_limit`."""
    match = config.compiled().search(text, groups=config.group != 0)
    return None if match is None else _group_text(match, config.group)


@block(
    "regex_find_all",
    category="data_process",
    description="Every match of a regular expression in a text, as a list.",
    example=r"pattern '\d+': 'a1 b22 c333' -> ['1', '22', '333']",
    # Always in a worker thread (where RE2 releases the GIL): matching is linear in the text,
    # which may be long, so the executor must not move the block onto the event loop.
    blocking=True,
)
def regex_find_all(config: RegexConfig, text: str) -> list[str]:
    """Returns the chosen group (the whole match unless `group` is set) of every
    non-overlapping match of the pattern, in order; an empty list when there is none. A
    group that took no part in a match gives an empty text.

    Patterns are as in `regex_extract`: Python's syntax, run on RE2 in linear time (no
    backreferences or lookaround; `\\b` sees ASCII word characters only). After an empty
    match the next match starts one character later (Python's `re` may also find a
    non-empty match at the same place). More than 100,000 matches, or more than 1 s of CPU
    time finding them, is an error (code `regex_limit`)."""
    matches = config.compiled().finditer(text, groups=config.group != 0)
    return [_group_text(match, config.group) for match in matches]


# JSONPath filters may test a value with a regular expression (`=~`) and compute with `+ - *`:
# the regex runs on RE2, and an operation may not build a text or list past these sizes.
_JSONPATH_MAX_CHARS = 4_000_000
_JSONPATH_MAX_ITEMS = 100_000
_JSONPATH_MAX_INT_BITS = 10_000


@lru_cache(maxsize=1)
def _re2_expression_class() -> type[Any]:
    """A JSONPath filter expression whose `=~` is matched by RE2 (jsonpath_ng's own runs
    Python's backtracking `re`). Made on first use: jsonpath_ng loads lazily."""
    from jsonpath_ng.ext.filter import Expression
    from jsonpath_ng.jsonpath import DatumInContext

    class Re2RegexExpression(Expression):
        regex: UserRegex

        def find(self, datum: Any) -> list[Any]:
            wrapped = DatumInContext.wrap(datum)
            return [
                found
                for found in self.target.find(wrapped)
                # json_path runs on the event loop: the search is bounded for it.
                if isinstance(found.value, str)
                and self.regex.contains_match(found.value, work_limit=INLINE_WORK)
            ]

    return Re2RegexExpression


def _checked_operation(symbol: str, apply: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def checked(left: Any, right: Any) -> Any:
        size: int | None = None
        if symbol == "*":
            if isinstance(left, int) and isinstance(right, int):
                bits = left.bit_length() + right.bit_length()
                if bits > _JSONPATH_MAX_INT_BITS:
                    raise ValueError(
                        f"path: `*` would make an integer of about {bits:,} bits "
                        f"(limit {_JSONPATH_MAX_INT_BITS:,})"
                    )
            elif isinstance(left, str | list) and isinstance(right, int):
                size = len(left) * right
            elif isinstance(right, str | list) and isinstance(left, int):
                size = len(right) * left
        elif symbol == "+" and isinstance(left, str | list) and isinstance(right, str | list):
            size = len(left) + len(right)
        if size is not None:
            texts = isinstance(left, str) or isinstance(right, str)
            limit = _JSONPATH_MAX_CHARS if texts else _JSONPATH_MAX_ITEMS
            if size > limit:
                raise ValueError(
                    f"path: `{symbol}` would make a value of {size:,} characters or items "
                    f"(limit {limit:,})"
                )
        return apply(left, right)

    return checked


_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _children(node: Any, path_type: type[Any]) -> list[Any]:
    values = list(vars(node).values()) if hasattr(node, "__dict__") else []
    found: list[Any] = []
    while values:
        value = values.pop()
        if isinstance(value, path_type):
            found.append(value)
        elif isinstance(value, list | tuple):
            values.extend(value)
    return found


def _bound_jsonpath(path: JSONPath) -> None:
    """Make a parsed path safe to run on untrusted data: `=~` on RE2, `sub()` refused,
    arithmetic bounded."""
    from jsonpath_ng.ext.arithmetic import Operation
    from jsonpath_ng.ext.filter import Expression
    from jsonpath_ng.ext.string import Sub
    from jsonpath_ng.jsonpath import JSONPath

    stack = [path]
    while stack:
        node = stack.pop()
        if isinstance(node, Sub):
            raise ValueError(
                "path uses `sub()`, which runs a regular expression on Python's backtracking "
                "engine; use the regex blocks instead"
            )
        if isinstance(node, Expression) and node.op == "=~" and isinstance(node.value, str):
            expression: Any = node
            expression.regex = compile_regex(
                node.value, label=f"path: the `=~` pattern {node.value!r}"
            )
            expression.__class__ = _re2_expression_class()
        if isinstance(node, Operation) and node.op_symbol in _ARITHMETIC:
            node.op = _checked_operation(node.op_symbol, _ARITHMETIC[node.op_symbol])
        stack.extend(_children(node, JSONPath))


@lru_cache(maxsize=256)
def _compile_jsonpath(path: str) -> JSONPath:
    # jsonpath_ng (and its parser tables) load on first use, not with the server.
    from jsonpath_ng.ext.parser import parse as parse_jsonpath

    parsed: JSONPath = parse_jsonpath(path)
    _bound_jsonpath(parsed)
    return parsed


class JsonPathConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="A JSONPath expression, such as $.items[*].name.")
    first: bool = Field(
        False, description="Return the first match (or None) instead of the list of matches."
    )

    @field_validator("path")
    @classmethod
    def _parses(cls, path: str) -> str:
        try:
            _compile_jsonpath(path)
        except ValueError as exc:  # our refusals (a bad `=~` pattern, `sub()`) say it all
            if str(exc).startswith("path"):
                raise
            raise ValueError(f"path is not a valid JSONPath expression: {exc}") from None
        except Exception as exc:  # jsonpath_ng raises lexer, parser and other errors
            raise ValueError(f"path is not a valid JSONPath expression: {exc}") from None
        return path


@block(
    "json_path",
    category="data_process",
    description="Select values from JSON data with a JSONPath expression.",
    example='$.items[*].name: {"items": [{"name": "a"}, {"name": "b"}]} -> ["a", "b"]',
    inline=True,
)
def json_path(config: JsonPathConfig, data: Any) -> Any:
    """Selects values from JSON data (objects, lists and plain values) with a JSONPath
    expression: `$.a.b`, `$.items[*].name`, `$..price`, `$.items[?(@.price > 10)]`,
    `$.items[0:2]`. Returns the list of every value matched, in document order (an empty list
    when nothing matches); with `first` on, the first value matched or None.

    A filter's `=~` (`$.items[?(@.name =~ "^a")]`) takes a pattern in Python's syntax run on
    RE2, in linear time, as in the regex blocks (no backreferences or lookaround), on texts
    of at most 5,000,000 characters divided by the pattern's positions (this block runs on
    the server's event loop); the `sub()` extension is refused. Arithmetic in a path may not
    build a text or list of more than 4,000,000 characters or 100,000 items."""
    matches = [found.value for found in _compile_jsonpath(config.path).find(data)]
    if config.first:
        return matches[0] if matches else None
    return matches


class ToJsonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    indent: int | None = Field(
        None, ge=0, description="Indent nested values by this many spaces; none for one line."
    )
    sort_keys: bool = Field(False, description="Write the keys of objects in sorted order.")


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"a {type(value).__name__} cannot be written as JSON")


@block(
    "to_json",
    category="data_process",
    description="Write a value as JSON text.",
    example='{"a": [1, 2]} -> \'{"a": [1, 2]}\'',
    inline=True,
)
def to_json(config: ToJsonConfig, value: Any) -> str:
    """Writes a value (text, number, boolean, None, list, object) as JSON text. Non-ASCII
    characters are written as they are. A value JSON cannot hold, such as NaN or an object
    with keys that are not text, is an error."""
    try:
        return json.dumps(
            value,
            indent=config.indent,
            sort_keys=config.sort_keys,
            ensure_ascii=False,
            allow_nan=False,
            default=_json_default,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"input 'value' cannot be written as JSON: {exc}") from None
    except RecursionError:
        raise ValueError("input 'value' cannot be written as JSON: it contains itself") from None


@block(
    "from_json",
    category="data_process",
    description="Parse JSON text into a value.",
    example='\'{"a": [1, 2]}\' -> {"a": [1, 2]}',
    inline=True,
)
def from_json(text: str) -> Any:
    """Parses JSON text into the value it holds (object, list, text, number, boolean or
    None). Text that is not valid JSON is an error naming the line and column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"input 'text' is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


# -- lists ---------------------------------------------------------------------------------


@block(
    "list_length",
    category="data_process",
    description="The number of items in a list.",
    example="['a', 'b', 'c'] -> 3",
    inline=True,
)
def list_length(items: list[Any]) -> int:
    """Counts the items of a list."""
    return len(items)


class ListSliceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    start: int | None = Field(
        None, description="Index of the first item kept; negative counts from the end."
    )
    stop: int | None = Field(
        None, description="Index of the first item no longer kept; negative counts from the end."
    )
    step: int | None = Field(
        None, description="Keep every step-th item; negative walks backwards. Not 0."
    )

    @field_validator("step")
    @classmethod
    def _step_not_zero(cls, step: int | None) -> int | None:
        if step == 0:
            raise ValueError("step cannot be 0")
        return step


@block(
    "list_slice",
    category="data_process",
    description="A part of a list, as with Python's items[start:stop:step].",
    example="start 1, stop 3: ['a', 'b', 'c', 'd'] -> ['b', 'c']",
    inline=True,
)
def list_slice(config: ListSliceConfig, items: list[Any]) -> list[Any]:
    """Keeps the items from index `start` up to, not including, index `stop`, every
    `step`-th one: Python's `items[start:stop:step]`. Indexes count from 0; negative ones
    count from the end (stop -1 leaves out the last item). Unset bounds mean the whole list,
    and bounds beyond the list are cut to it."""
    return items[config.start : config.stop : config.step]


def _whole_numbers(item: Any) -> Any:
    """The value with every whole float as an int, so 2.0 and 2 write the same JSON."""
    if isinstance(item, float) and item.is_integer():
        return int(item)
    if isinstance(item, list):
        return [_whole_numbers(x) for x in item]
    if isinstance(item, dict):
        return {key: _whole_numbers(x) for key, x in item.items()}
    return item


def _canonical(item: Any) -> str | None:
    """A text equal for equal JSON values (keys sorted), or None when there is none."""
    try:
        return json.dumps(_whole_numbers(item), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


@block(
    "list_unique",
    category="data_process",
    description="Remove repeated items from a list, keeping the first of each.",
    example="['a', 'b', 'a', 'c'] -> ['a', 'b', 'c']",
    inline=True,
)
def list_unique(items: list[Any]) -> list[Any]:
    """Leaves out every item equal to an earlier one, keeping the order of first
    occurrences. Objects and lists compare by content (key order does not matter), and
    a number is the same whether written 2 or 2.0, but values of different kinds are never
    equal: 1, "1" and true are three items."""
    seen: set[str] = set()
    others: list[Any] = []  # items with no JSON form, compared by equality
    unique: list[Any] = []
    for item in items:
        key = _canonical(item)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        else:
            if any(item == other for other in others):
                continue
            others.append(item)
        unique.append(item)
    return unique


class ListFlattenConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = Field(1, ge=1, description="How many levels of nested lists to open.")


def _flatten(items: list[Any], depth: int) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        if isinstance(item, list) and depth > 0:
            flat.extend(_flatten(item, depth - 1))
        else:
            flat.append(item)
    return flat


@block(
    "list_flatten",
    category="data_process",
    description="Turn a list of lists into one list.",
    example="[[1, 2], [3], 4] -> [1, 2, 3, 4]",
    inline=True,
)
def list_flatten(config: ListFlattenConfig, items: list[Any]) -> list[Any]:
    """Replaces each item that is a list by its items, in order; other items stay as they
    are. With `depth` above 1, lists nested that many levels deep are opened too."""
    return _flatten(items, config.depth)


class ZipRecordsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fields: list[str] = Field(
        min_length=1,
        description="The records' field names; each is an input port taking a list.",
    )
    strict: bool = Field(
        True,
        description="Lists of different lengths are an error; off, the longer ones are cut.",
    )

    @field_validator("fields")
    @classmethod
    def _valid_names(cls, fields: list[str]) -> list[str]:
        seen: set[str] = set()
        for name in fields:
            if not name:
                raise ValueError("a field name cannot be empty")
            if name in seen:
                raise ValueError(f"field name {name!r} is given twice")
            seen.add(name)
        return fields


def _zip_ports(config: ZipRecordsConfig) -> list[str]:
    return list(config.fields)


@block(
    "zip_records",
    category="data_process",
    description="Combine lists, one per field, into a list of records.",
    example="fields [name, age]: name ['Tom', 'Ann'], age [30, 25] -> "
    "[{'name': 'Tom', 'age': 30}, {'name': 'Ann', 'age': 25}]",
    dynamic_ports=_zip_ports,
    inline=True,
)
def zip_records(config: ZipRecordsConfig, **columns: list[Any]) -> list[dict[str, Any]]:
    """Takes one list per field (each field is an input port) and returns one record per
    position: the first record holds the first item of every list, and so on. The lists
    must be equally long; with `strict` off, the records stop at the shortest list."""
    missing = [name for name in config.fields if name not in columns]
    if missing:
        raise ValueError(f"input port {missing[0]!r} has no value")
    unknown = sorted(set(columns) - set(config.fields))
    if unknown:
        raise ValueError(f"input port {unknown[0]!r} is not one of the fields")
    lists = [columns[name] for name in config.fields]
    for name, values in zip(config.fields, lists, strict=True):
        if not isinstance(values, list):
            raise ValueError(f"input port {name!r} takes a list, not {type(values).__name__}")
    lengths = {len(values) for values in lists}
    if config.strict and len(lengths) > 1:
        described = ", ".join(
            f"{name!r} has {len(values)}" for name, values in zip(config.fields, lists, strict=True)
        )
        raise ValueError(
            f"the lists differ in length ({described}); turn strict off to cut them to the shortest"
        )
    return [dict(zip(config.fields, row, strict=True)) for row in zip(*lists, strict=False)]

"""Jinja2 templates for prompts, texts and URLs, always compiled and rendered in a bounded sandbox.

Templates come from whoever edits a flow and their values from whoever calls an app, so both the
template and its inputs are untrusted. Three layers keep one template from hurting the server:

- The immutable sandbox refuses attributes starting with an underscore (no reaching Python
  internals through `''.__class__`) and methods that change a value in place (values arriving
  at a port may be shared with other nodes). Undefined variables are errors, not empty text.
- Compiling is cheap and bounded: nothing is evaluated at compile time (Jinja would otherwise
  fold constant expressions such as ``{{ 10 ** 100000000 }}`` while a flow is merely
  *validated*), the source is capped in characters, tokens and nesting, and a template that
  fails to compile is remembered, so a bad template is paid for once.
- Rendering is bounded (`TemplateLimits`): every operator (``** * + % // / -``), filter and call
  checks the size of what it is about to build *before* building it; loops, calls and
  operations count steps against a step and CPU-time budget; macros may not recurse deeply;
  and the output stops at a size cap. A refusal is a `TemplateLimitError` (code
  ``template_limit``) that names the limit. docs/security/templates.md explains each limit.

`render` is the one way to render: it installs the budget the hooks charge. Every limit is a
field of `LIMITS`.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

import jinja2
import markupsafe
from jinja2 import StrictUndefined, meta, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context, LoopContext, markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.utils import Namespace, generate_lorem_ipsum, pass_eval_context

from dagwright.errors import DagwrightError

# -- limits ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TemplateLimits:
    """What one template may cost. Generous for real prompts (the project's largest template
    has about 70 tokens), small enough that no template can hold the server."""

    source_chars: int = 100_000  # characters of template source
    tokens: int = 2_000  # tags, expressions, names and operators (plain text is one token)
    depth: int = 40  # levels of nesting in the parsed template
    output_chars: int = 4_000_000  # characters of output, and of any one text built
    items: int = 100_000  # items of a list or range built, sorted or joined
    int_bits: int = 10_000  # size of an integer built by * or ** (about 3,000 digits)
    steps: int = 1_000_000  # loop iterations, calls, filters and operations in one render
    cpu_seconds: float = 0.25  # CPU time of one render (prompts render on the event loop)
    call_depth: int = 50  # macros calling macros (or themselves)
    built_chars: int = 40_000_000  # characters built by operators, filters and calls in all
    urlize_word_chars: int = 1_000  # longer words are escaped, not linked (urlize is quadratic)
    slow_filter_chars: int = 200_000  # input of the pure-Python filters wordwrap and pprint


LIMITS = TemplateLimits()


class TemplateLimitError(DagwrightError, ValueError):
    """A template, or one of its renders, went past one of the `TemplateLimits`.

    A ValueError too, so that a config validator turns it into a validation problem of its
    node and field, like a template that does not parse."""

    code = "template_limit"

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit  # the TemplateLimits field

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "limit": self.limit}


_PREFIX = "refused by the template limits: "


class _Refusal(Exception):
    """Raised inside the sandbox; `render` and `check_template` turn it into a
    TemplateLimitError that names what was being rendered."""

    def __init__(self, detail: str, limit: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.limit = limit


def _refuse(detail: str, limit: str) -> _Refusal:
    return _Refusal(f"{detail} (limit {limit} = {getattr(LIMITS, limit):,})", limit)


# -- the render budget ----------------------------------------------------------------------


class _Budget:
    """What one render has spent: steps, CPU time, call depth, characters built."""

    __slots__ = ("built", "cpu_limit", "depth", "since_clock", "started", "steps")

    _CLOCK_EVERY = 16  # thread_time costs ~2 us: read it every 16 units of work

    def __init__(self) -> None:
        self.steps = 0
        self.since_clock = 0
        self.depth = 0
        self.built = 0
        self.started: float | None = None  # read at the first step: most renders take none
        self.cpu_limit = LIMITS.cpu_seconds

    def tick(self, cost: int = 1) -> None:
        self.steps += cost
        if self.steps > LIMITS.steps:
            raise _refuse(f"the render took more than {LIMITS.steps:,} steps", "steps")
        if self.started is None:
            self.started = time.thread_time()
        self.since_clock += cost
        if self.since_clock >= self._CLOCK_EVERY:
            self.since_clock = 0
            if time.thread_time() - self.started > self.cpu_limit:
                raise _refuse(
                    f"the render used more than {self.cpu_limit:g} s of CPU time", "cpu_seconds"
                )

    def build(self, chars: int) -> None:
        self.built += chars
        if self.built > LIMITS.built_chars:
            raise _refuse(
                f"the render built more than {LIMITS.built_chars:,} characters of text in all",
                "built_chars",
            )


_BUDGET: ContextVar[_Budget | None] = ContextVar("dagwright_template_budget", default=None)


def _tick(cost: int = 1) -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.tick(cost)


def _built(result: Any, what: str) -> None:
    """Check a text or list just made (by a filter or call whose size could not be known
    before), and charge a text to the render's characters built."""
    if isinstance(result, str):
        _check_text_size(len(result), what)
        budget = _BUDGET.get()
        if budget is not None:
            budget.build(len(result))
    elif isinstance(result, list | tuple):
        _check_items(len(result), what)


def _cost(value: Any) -> int:
    """Steps charged for a filter or call on `value`: one, plus one per 1,024 items."""
    try:
        return 1 + (len(value) >> 10)
    except Exception:  # no length (a number, a generator, an Undefined...)
        return 1


# -- sizes ----------------------------------------------------------------------------------


def _namespace_items(value: Namespace) -> dict[str, Any]:
    try:
        attrs = object.__getattribute__(value, "_Namespace__attrs")
    except AttributeError:  # pragma: no cover - another Jinja version
        return {}
    return attrs if isinstance(attrs, dict) else {}


def _weight(value: Any, limit: int, indent: int = 0) -> int:
    """About len(str(value)), counted without building it; stops once past `limit`. With
    `indent`, the size of the value printed one item a line, each indented `indent` characters
    per level of nesting (tojson with indent, pprint).

    A list may hold the same long text many times (``[text] * 1000`` is cheap), so only its
    weight, not its length, says what printing it would cost. Walks iteratively, so deep or
    self-containing values just run past the limit."""
    total = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if indent:
            total += depth * indent + 1
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            total += 24
        elif isinstance(item, list | tuple | set | frozenset):
            total += 2 + 2 * len(item)
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            stack.extend((key, depth + 1) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, Namespace):
            total += 12
            stack.append((_namespace_items(item), depth))
        elif isinstance(item, type({}.keys()) | type({}.values()) | type({}.items())):
            total += 12
            stack.append((list(item), depth))
        else:
            total += 64  # objects whose text is their short repr (macros, loops, ranges...)
        if total > limit:
            return total
    return total


def _check_printable(value: Any, what: str) -> None:
    """Refuse to turn a container into text when that text would pass the output cap."""
    if isinstance(value, str | int | float | bool) or value is None:
        return
    weight = _weight(value, LIMITS.output_chars)
    if weight > LIMITS.output_chars:
        raise _refuse(
            f"{what} would make a text of more than {LIMITS.output_chars:,} characters",
            "output_chars",
        )


def _check_text_size(size: int, what: str) -> None:
    if size > LIMITS.output_chars:
        raise _refuse(f"{what} would make a text of {size:,} characters", "output_chars")


def _check_items(size: int, what: str) -> None:
    if size > LIMITS.items:
        raise _refuse(f"{what} would make {size:,} items", "items")


def _as_count(value: Any) -> int | None:
    """An int (or bool) used as a count or width, else None."""
    return int(value) if isinstance(value, int) else None


class _Limited:
    """An iterator that refuses to yield more than LIMITS.items items."""

    __slots__ = ("_count", "_iterator", "_what")

    def __init__(self, iterable: Iterable[Any], what: str) -> None:
        self._iterator = iter(iterable)
        self._count = 0
        self._what = what

    def __iter__(self) -> _Limited:
        return self

    def __next__(self) -> Any:
        item = next(self._iterator)
        self._count += 1
        if self._count > LIMITS.items:
            raise _refuse(f"{self._what} takes more than {LIMITS.items:,} items", "items")
        if not self._count & 1023:
            _tick()
        return item


def _bounded_list(value: Any, what: str) -> list[Any]:
    """The items of an iterable as a list, refusing more than LIMITS.items of them."""
    if isinstance(value, list | tuple | dict | str | set | frozenset | range):
        _check_items(len(value), what)
        return list(value)
    return list(_Limited(value, what))


# -- operators ------------------------------------------------------------------------------

_SEQUENCES = (str, list, tuple)


def _check_repeat(sequence: Any, times: int) -> None:
    if times <= 0:
        return
    if isinstance(sequence, str):
        _check_text_size(len(sequence) * times, "`*` on a text")
    else:
        _check_items(len(sequence) * times, "`*` on a list")


def _check_multiply(left: Any, right: Any) -> None:
    if isinstance(left, int) and isinstance(right, int):
        bits = left.bit_length() + right.bit_length()
        if bits > LIMITS.int_bits:
            raise _refuse(f"`*` would build an integer of about {bits:,} bits", "int_bits")
    elif isinstance(left, _SEQUENCES) and isinstance(right, int):
        _check_repeat(left, right)
    elif isinstance(right, _SEQUENCES) and isinstance(left, int):
        _check_repeat(right, left)


def _check_power(base: Any, exponent: Any) -> None:
    if not (isinstance(base, int) and isinstance(exponent, int)):
        return  # a float power overflows to an error at once
    if exponent <= 1 or base in (-1, 0, 1):
        return
    bits = exponent * (abs(base).bit_length() - 1) + 1  # a lower bound of the result's size
    if bits > LIMITS.int_bits:
        raise _refuse(f"`**` would build an integer of about {bits:,} bits", "int_bits")


def _check_add(left: Any, right: Any) -> None:
    if isinstance(left, str) and isinstance(right, str):
        _check_text_size(len(left) + len(right), "`+` on texts")
    elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
        _check_items(len(left) + len(right), "`+` on lists")


# printf-style conversions: %(key)flags width .precision length type
_PERCENT_SPEC = re.compile(
    r"%(?:\((?P<key>[^)]{0,256})\))?[-#0 +]*(?P<width>\*|\d+)?"
    r"(?:\.(?P<precision>\*|\d+))?[hlL]?(?P<kind>.?)",
    re.DOTALL,
)


def _check_percent(template: str, values: Any) -> None:
    """`template % values` (the % operator, the format filter): widths, precisions and the
    values printed, before anything is built."""
    positional = list(values) if isinstance(values, tuple) else [values]
    mapping = values if isinstance(values, Mapping) else None
    size = len(template)
    index = 0
    for spec in _PERCENT_SPEC.finditer(template):
        if spec.group("kind") == "%":
            continue
        widths = []
        for part in ("width", "precision"):
            given = spec.group(part)
            if given == "*":
                star = positional[index] if index < len(positional) else 0
                index += 1
                widths.append(_as_count(star) or 0)
            elif given:
                widths.append(int(given))
        for width in widths:
            _check_text_size(width, "a `%` format width or precision")
        if spec.group("key") is not None and mapping is not None:
            value = mapping.get(spec.group("key"))
        else:
            value = positional[index] if index < len(positional) else None
            index += 1
        weight = _weight(value, LIMITS.output_chars)
        size += max([weight, *widths])
        _check_text_size(size, "`%` formatting")


def _binop(operator: str, left: Any, right: Any) -> None:
    if operator == "**":
        _check_power(left, right)
    elif operator == "*":
        _check_multiply(left, right)
    elif operator == "+":
        _check_add(left, right)
    elif operator == "%" and isinstance(left, str):
        _check_percent(left, right)


# -- filters and calls ----------------------------------------------------------------------

# Filters that print their whole input (or arguments) as text.
_PRINTING_FILTERS = frozenset(
    {
        "capitalize",
        "center",
        "e",
        "escape",
        "forceescape",
        "indent",
        "lower",
        "pprint",
        "replace",
        "safe",
        "string",
        "striptags",
        "title",
        "tojson",
        "trim",
        "truncate",
        "upper",
        "urlencode",
        "urlize",
        "wordcount",
        "wordwrap",
        "xmlattr",
    }
)
# Filters that take a whole sequence at once (sorting, summing...).
_WHOLE_SEQUENCE_FILTERS = frozenset(
    {"dictsort", "groupby", "list", "max", "min", "sort", "sum", "unique", "reverse"}
)


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _replace_size(text: str, old: str, new: str, count: int | None) -> int:
    occurrences = len(text) + 1 if old == "" else text.count(old)
    if count is not None and count >= 0:
        occurrences = min(occurrences, count)
    return len(text) + occurrences * (len(new) - len(old))


def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _precheck_filter(  # noqa: C901, PLR0912
    name: str, value: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> None:
    """Refuse what a filter would build too large, before it builds it."""
    if name in _PRINTING_FILTERS:
        _check_printable(value, f"the filter {name!r}")
    if name == "center":
        width = _as_count(_arg(args, kwargs, 0, "width"))
        if width is not None:
            _check_text_size(width, "the filter 'center'")
    elif name == "indent":
        width = _arg(args, kwargs, 0, "width")
        pad = len(width) if isinstance(width, str) else _as_count(width) or 0
        text = _text_of(value)
        _check_text_size(len(text) + (text.count("\n") + 1) * pad, "the filter 'indent'")
    elif name == "replace":
        old, new = _arg(args, kwargs, 0, "old"), _arg(args, kwargs, 1, "new")
        if isinstance(old, str) and isinstance(new, str):
            count = _as_count(_arg(args, kwargs, 2, "count"))
            _check_text_size(
                _replace_size(_text_of(value), old, new, count), "the filter 'replace'"
            )
    elif name == "format":
        _check_printable(args, "the filter 'format'")
        _check_printable(kwargs, "the filter 'format'")
        if isinstance(value, str):
            _check_percent(value, dict(kwargs) if kwargs else tuple(args))
    elif name == "wordwrap":
        text = _text_of(value)
        if len(text) > LIMITS.slow_filter_chars:
            raise _refuse(
                f"the filter 'wordwrap' on a text of {len(text):,} characters",
                "slow_filter_chars",
            )
        wrap = _arg(args, kwargs, 2, "wrapstring")
        joiner = len(wrap) if isinstance(wrap, str) else 1
        _check_text_size(len(text) * (1 + joiner), "the filter 'wordwrap'")
    elif name == "pprint":
        weight = _weight(value, LIMITS.slow_filter_chars, indent=1)
        if weight > LIMITS.slow_filter_chars:
            raise _refuse(
                f"the filter 'pprint' on a value of more than {LIMITS.slow_filter_chars:,} "
                "characters",
                "slow_filter_chars",
            )
    elif name == "tojson":
        indent = _arg(args, kwargs, 0, "indent")
        pad = len(indent) if isinstance(indent, str) else _as_count(indent) or 0
        if _weight(value, LIMITS.output_chars, indent=pad) > LIMITS.output_chars:
            raise _refuse(
                f"the filter 'tojson' would make a text of more than {LIMITS.output_chars:,} "
                "characters",
                "output_chars",
            )
    elif name == "batch":
        count = _as_count(_arg(args, kwargs, 0, "linecount"))
        if count is not None:
            _check_items(count, "the filter 'batch'")
    elif name == "slice":
        count = _as_count(_arg(args, kwargs, 0, "slices"))
        if count is not None:
            _check_items(count, "the filter 'slice'")


def _bounded_join(
    original: Callable[..., Any], eval_ctx: Any, value: Any, *args: Any, **kwargs: Any
) -> Any:
    items = _bounded_list(value, "the filter 'join'")
    attribute = _arg(args, kwargs, 1, "attribute")
    if attribute is not None:  # join the attribute's values: those are what get printed
        getter = make_attrgetter(eval_ctx.environment, attribute)
        items = [getter(item) for item in items]
    separator = _arg(args, kwargs, 0, "d") if args or "d" in kwargs else ""
    size = len(_text_of(separator)) * max(len(items) - 1, 0)
    for item in items:
        size += _weight(item, LIMITS.output_chars)
        _check_text_size(size, "the filter 'join'")
    return original(eval_ctx, items, separator)


def _bounded_sum(
    original: Callable[..., Any], environment: Any, value: Any, *args: Any, **kwargs: Any
) -> Any:
    items = _bounded_list(value, "the filter 'sum'")
    attribute = _arg(args, kwargs, 0, "attribute")
    start = _arg(args, kwargs, 1, "start") if len(args) > 1 or "start" in kwargs else 0
    if attribute is not None:
        getter = make_attrgetter(environment, attribute)
        items = [getter(item) for item in items]
    if isinstance(start, int | float) and all(isinstance(i, int | float) for i in items):
        return sum(items, start)
    # Adding lists or texts one by one copies ever longer values: bound each addition.
    total = start
    for item in items:
        _tick()
        _binop("+", total, item)
        total = total + item
    return total


def _bounded_urlize(
    original: Callable[..., Any], eval_ctx: Any, value: Any, *args: Any, **kwargs: Any
) -> Any:
    """Jinja's urlize takes time quadratic in the length of a word: feed it short pieces
    (budget checked between them) and leave words over the limit unlinked, escaped."""
    pieces: list[Any] = []
    chunk: list[str] = []
    chunk_size = 0

    def flush() -> None:
        nonlocal chunk_size
        if chunk:
            _tick(1 + chunk_size // 256)
            pieces.append(original(eval_ctx, "".join(chunk), *args, **kwargs))
            chunk.clear()
            chunk_size = 0

    for word in re.split(r"(\s+)", _text_of(value)):
        if len(word) > LIMITS.urlize_word_chars and not word.isspace():
            flush()
            escaped = markupsafe.escape(word)
            pieces.append(escaped if eval_ctx.autoescape else str(escaped))
            continue
        chunk.append(word)
        chunk_size += len(word)
        if chunk_size >= 4_096:
            flush()
    flush()
    if eval_ctx.autoescape:
        return markupsafe.Markup("").join(pieces)
    return "".join(str(piece) for piece in pieces)


_REPLACED_FILTERS: dict[str, Callable[..., Any]] = {
    "join": _bounded_join,
    "sum": _bounded_sum,
    "urlize": _bounded_urlize,
}


def _bounded_filter(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """The filter with its size checks, step count and result check."""
    passes_context = hasattr(original, "jinja_pass_arg")
    offset = 1 if passes_context else 0
    replacement = _REPLACED_FILTERS.get(name)

    @functools.wraps(original)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        value = args[offset] if len(args) > offset else None
        _tick(_cost(value))
        rest = args[offset + 1 :]
        _precheck_filter(name, value, rest, kwargs)
        if name in _WHOLE_SEQUENCE_FILTERS and value is not None:
            if isinstance(value, Mapping):
                _check_items(len(value), f"the filter {name!r}")
            elif not isinstance(value, str):
                value = _bounded_list(value, f"the filter {name!r}")
                args = (*args[:offset], value, *rest)
        if replacement is not None:
            result = replacement(original, *args, **kwargs)
        else:
            result = original(*args, **kwargs)
        _built(result, f"the filter {name!r}")
        return result

    return bounded


def _bounded_range(*args: Any) -> range:
    _tick()
    numbers = range(*args)
    try:
        size = len(numbers)
    except OverflowError:
        size = LIMITS.items + 1
    _check_items(size, "range()")
    return numbers


def _bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    _tick()
    words = (_as_count(n) or 0) * (_as_count(max) or 0)
    _check_text_size(words * 12, "lipsum()")  # words of up to about 12 characters
    return generate_lorem_ipsum(n=n, html=html, min=min, max=max)


def _precheck_method(method: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:  # noqa: C901
    """Size checks for the methods of texts (and ints) that can build a lot from a little."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if isinstance(owner, str):
        what = f"the text method {name!r}"
        if name in ("center", "ljust", "rjust", "zfill"):
            width = _as_count(_arg(args, kwargs, 0, "width"))
            if width is not None:
                _check_text_size(width, what)
        elif name == "expandtabs":
            size = _as_count(_arg(args, kwargs, 0, "tabsize"))
            size = 8 if size is None else size
            _check_text_size(len(owner) + owner.count("\t") * max(size, 0), what)
        elif name == "replace":
            old, new = _arg(args, kwargs, 0, "old"), _arg(args, kwargs, 1, "new")
            if isinstance(old, str) and isinstance(new, str):
                count = _as_count(_arg(args, kwargs, 2, "count"))
                _check_text_size(_replace_size(owner, old, new, count), what)
        elif name == "join" and args:
            items = args[0]
            if isinstance(items, list | tuple):
                size = len(owner) * max(len(items) - 1, 0)
                for item in items:
                    size += len(item) if isinstance(item, str) else 0
                    _check_text_size(size, what)
        elif name == "translate" and args and isinstance(args[0], Mapping):
            longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
            _check_text_size(len(owner) * max(longest, 1), what)
    elif isinstance(owner, int) and name == "to_bytes":
        length = _as_count(_arg(args, kwargs, 0, "length"))
        if length is not None:
            _check_text_size(length, "int.to_bytes")


class _GuardedLoop:
    """A loop's iterable that charges one step per iteration (a loop with no output and no
    calls must be bounded too)."""

    __slots__ = ("_budget", "_iterable", "_iterator")

    def __init__(self, iterable: Any, budget: _Budget) -> None:
        self._iterable = iterable
        self._iterator = iter(iterable)
        self._budget = budget

    def __iter__(self) -> _GuardedLoop:
        return self

    def __next__(self) -> Any:
        item = next(self._iterator)
        self._budget.tick()
        return item

    def __len__(self) -> int:
        return len(self._iterable)  # a TypeError (no length) makes LoopContext count


LOOP_GUARD = "_dagwright_loop_guard"


def _guard_loop(iterable: Any) -> Any:
    budget = _BUDGET.get()
    return iterable if budget is None else _GuardedLoop(iterable, budget)


@pass_eval_context
def _finalize(eval_ctx: Any, value: Any) -> Any:
    """Every {{ value }}: a container is printed only when its text fits the output cap.

    Taking the eval context also stops Jinja from evaluating outputs at compile time."""
    _check_printable(value, "printing a value")
    return value


# -- the environment ------------------------------------------------------------------------


class _BoundedFormatter(SandboxedFormatter):
    """str.format in the sandbox, with widths and the total size checked per field."""

    def __init__(self, env: jinja2.Environment, **kwargs: Any) -> None:
        super().__init__(env, **kwargs)
        self._size = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        for digits in re.findall(r"\d+", format_spec):
            _check_text_size(int(digits), "a format width or precision")
        _check_printable(value, "str.format")
        _tick()
        text = super().format_field(value, format_spec)
        self._size += len(text)
        _check_text_size(self._size, "str.format")
        return text


class _BoundedEscapeFormatter(_BoundedFormatter, SandboxedEscapeFormatter):
    pass


class _BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with `~` (concatenation) sent through the size checks."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.join_texts(context.eval_ctx, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with every operator intercepted and every call, filter, loop and
    output bounded (see the module's docstring)."""

    # Intercepted operators are never folded at compile time (jinja2.nodes.BinExpr.as_const).
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    intercepted_unops = frozenset({"+", "-"})
    code_generator_class = _BoundedCodeGenerator

    def __init__(self) -> None:
        super().__init__(
            undefined=StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            optimized=False,  # no constant folding at compile time
            finalize=_finalize,
        )
        self.globals["range"] = _bounded_range
        self.globals["lipsum"] = _bounded_lipsum
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.filters[LOOP_GUARD] = _guard_loop

    @staticmethod
    def concat(parts: Iterable[str]) -> str:
        """Joins what a macro, call block, set block or filter block wrote."""
        pieces = parts if isinstance(parts, list) else list(parts)
        size = sum(map(len, pieces))
        _check_text_size(size, "a macro or block")
        text = "".join(pieces)
        _built(text, "a macro or block")
        return text

    def join_texts(self, eval_ctx: Any, values: tuple[Any, ...]) -> str:
        """The `~` operator."""
        _tick()
        size = 0
        for value in values:
            size += _weight(value, LIMITS.output_chars)
            _check_text_size(size, "`~`")
        text: str = markup_join(values) if eval_ctx.autoescape else str_join(values)
        _built(text, "`~`")
        return text

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _tick()
        _binop(operator, left, right)
        result = self.binop_table[operator](left, right)
        if isinstance(result, str | list | tuple):
            _built(result, f"`{operator}`")
        return result

    def call_unop(self, context: Context, operator: str, arg: Any) -> Any:
        _tick()
        return self.unop_table[operator](arg)

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not self.is_safe_callable(obj):
            raise jinja2.exceptions.SecurityError(f"{obj!r} is not safely callable")
        budget = _BUDGET.get()
        if budget is not None:
            budget.tick(_cost(args[0]) if args else 1)
        _precheck_method(obj, args, kwargs)
        if isinstance(obj, LoopContext) and args and budget is not None:
            args = (_GuardedLoop(args[0], budget), *args[1:])  # a recursive loop's next level
        if budget is None:
            return context.call(obj, *args, **kwargs)
        budget.depth += 1
        try:
            if budget.depth > LIMITS.call_depth:
                raise _refuse(
                    f"calls nest more than {LIMITS.call_depth} deep (a macro calling itself?)",
                    "call_depth",
                )
            result = context.call(obj, *args, **kwargs)
        finally:
            budget.depth -= 1
        if isinstance(result, list | tuple):
            _built(result, "a call")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """str.format and str.format_map of the sandbox, with a bounded formatter."""
        if not isinstance(value, types.MethodType | types.BuiltinMethodType) or (
            value.__name__ not in ("format", "format_map")
        ):
            return None
        owner: Any = value.__self__
        if not isinstance(owner, str):
            return None
        str_type: type[str] = type(owner)
        is_format_map = value.__name__ == "format_map"
        formatter: _BoundedFormatter
        if isinstance(owner, markupsafe.Markup):
            formatter = _BoundedEscapeFormatter(self, escape=owner.escape)
        else:
            formatter = _BoundedFormatter(self)

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_format_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                kwargs = args[0]
                args = ()
            _tick()
            return str_type(formatter.vformat(owner, args, kwargs))

        return functools.update_wrapper(wrapper, value)


SANDBOX = BoundedEnvironment()

# -- compiling ------------------------------------------------------------------------------


class _Failure(NamedTuple):
    """Why a template did not compile: remembered, so that it is paid for once."""

    kind: str  # "syntax" or "limit"
    message: str
    lineno: int | None = None
    limit: str = ""

    def raise_for(self, field: str, text: str) -> NoReturn:
        if self.kind == "limit":
            raise TemplateLimitError(f"{field}: {_PREFIX}{self.message}", self.limit)
        lines = text.splitlines()
        source = ""
        if self.lineno and self.lineno <= len(lines):
            source = f" (line {self.lineno} reads: {lines[self.lineno - 1].strip()[:80]!r})"
        raise ValueError(f"{field} does not parse: line {self.lineno}: {self.message}{source}")


@dataclass(slots=True)
class _Compiled:
    variables: tuple[str, ...] | None  # None when the template does not parse
    template: jinja2.Template | None
    failure: _Failure | None


def _check_tokens(text: str) -> None:
    if len(text) > LIMITS.source_chars:
        raise _refuse(f"the template is {len(text):,} characters long", "source_chars")
    count = 0
    for _lineno, kind, _value in SANDBOX.lex(text):
        if kind != "whitespace":
            count += 1
            if count > LIMITS.tokens:
                raise _refuse(
                    f"the template has more than {LIMITS.tokens:,} tags, names and operators",
                    "tokens",
                )


def _check_depth(tree: nodes.Node) -> None:
    stack: list[tuple[nodes.Node, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > LIMITS.depth:
            raise _refuse(f"the template nests more than {LIMITS.depth} levels deep", "depth")
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())


def _guard_loops(tree: nodes.Template) -> None:
    """Every {% for %} iterates through the loop guard, which charges a step per item."""
    for loop in list(tree.find_all(nodes.For)):
        guarded = nodes.Filter(loop.iter, LOOP_GUARD, [], [], None, None, lineno=loop.lineno)
        guarded.set_environment(SANDBOX)
        loop.iter = guarded


def _too_deep() -> _Failure:
    """Jinja's parser or Python's compiler ran out of nesting (Python allows 20 nested loops)."""
    detail = (
        "the template nests too deeply to compile: at most about 20 loops or blocks may nest "
        f"(limit depth = {LIMITS.depth})"
    )
    return _Failure("limit", detail, limit="depth")


def _compile(text: str) -> _Compiled:
    variables: tuple[str, ...] | None = None
    try:
        _check_tokens(text)
        tree = SANDBOX.parse(text)
        _check_depth(tree)
        # find_undeclared_variables runs Jinja's code generator: before the loop guards.
        names = meta.find_undeclared_variables(tree)
        variables = tuple(sorted(name for name in names if name not in SANDBOX.globals))
        _guard_loops(tree)
        code = SANDBOX.compile(tree)
    except _Refusal as exc:
        return _Compiled(variables, None, _Failure("limit", exc.detail, limit=exc.limit))
    except jinja2.TemplateSyntaxError as exc:  # also an unknown filter or test
        return _Compiled(variables, None, _Failure("syntax", exc.message or str(exc), exc.lineno))
    except (RecursionError, MemoryError, SyntaxError):  # Jinja's or Python's nesting limits
        return _Compiled(variables, None, _too_deep())
    # Globals as a plain dict, not Jinja's ChainMap over the environment's: every render copies
    # them into its context, and copying a ChainMap costs several times a dict's (the sandbox's
    # globals are fixed when it is built).
    template = SANDBOX.template_class.from_code(SANDBOX, code, dict(SANDBOX.globals), None)
    return _Compiled(variables, template, None)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class _TemplateCache:
    """Compiled templates by source, failures included (an LRU, safe across threads)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[str, _Compiled] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> _Compiled:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
                self.hits += 1
                return found
            self.misses += 1
        compiled = _compile(text)  # outside the lock: a slow compile holds nobody up
        with self._lock:
            self._entries[text] = compiled
            self._entries.move_to_end(text)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        return compiled

    def __call__(self, text: str) -> jinja2.Template:
        """The compiled template; a TemplateSyntaxError or TemplateLimitError if none."""
        compiled = self.get(text)
        if compiled.template is None:
            failure = compiled.failure
            assert failure is not None
            if failure.kind == "syntax":
                raise jinja2.TemplateSyntaxError(failure.message, failure.lineno or 1)
            failure.raise_for("template", text)
        assert compiled.template is not None
        return compiled.template

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self.hits, self.misses, self.maxsize, len(self._entries))

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


compile_template = _TemplateCache(maxsize=512)


def template_variables(text: str) -> tuple[str, ...]:
    """The variables a template reads (its input ports), sorted."""
    compiled = compile_template.get(text)
    if compiled.variables is None:
        assert compiled.failure is not None
        compiled.failure.raise_for("template", text)
    assert compiled.variables is not None
    return compiled.variables


def variables_of(texts: Iterable[str]) -> list[str]:
    """The variables several templates read together, sorted."""
    return sorted({name for text in texts for name in template_variables(text)})


def check_template(text: str, field: str = "template") -> str:
    """For pydantic validators: the text when it compiles within the limits, else a ValueError
    naming the line (or a TemplateLimitError naming the limit). Warms the cache runs use."""
    compiled = compile_template.get(text)
    if compiled.failure is not None:
        compiled.failure.raise_for(field, text)
    return text


# -- rendering ------------------------------------------------------------------------------


def render(text: str, variables: dict[str, Any], what: str = "template") -> str:
    """Render a template within the limits; every failure becomes a ValueError that says what
    went wrong (a TemplateLimitError, code template_limit, when a limit was reached)."""
    compiled = compile_template.get(text)
    if compiled.template is None:
        assert compiled.failure is not None
        compiled.failure.raise_for(what, text)
    assert compiled.template is not None
    budget = _Budget()
    token = _BUDGET.set(budget)
    try:
        return _stream(compiled.template, variables)
    except _Refusal as exc:
        raise TemplateLimitError(f"{what}: {_PREFIX}{exc.detail}", exc.limit) from None
    except jinja2.exceptions.SecurityError as exc:
        raise ValueError(f"{what}: refused by the sandbox: {exc}") from None
    except jinja2.UndefinedError as exc:
        raise ValueError(f"{what}: undefined value: {exc}") from None
    except MemoryError:
        raise TemplateLimitError(
            f"{what}: {_PREFIX}the render ran out of memory", "built_chars"
        ) from None
    except Exception as exc:
        raise ValueError(f"{what} failed to render: {type(exc).__name__}: {exc}") from None
    finally:
        _BUDGET.reset(token)


def _stream(template: jinja2.Template, variables: dict[str, Any]) -> str:
    """The output, read as it is made and stopped at the output cap."""
    parts: list[str] = []
    size = 0
    stream: Iterator[str] = template.generate(**variables)
    try:
        for chunk in stream:
            size += len(chunk)
            if size > LIMITS.output_chars:
                raise _refuse(
                    f"the output passed {LIMITS.output_chars:,} characters", "output_chars"
                )
            parts.append(chunk)
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    return "".join(parts)


__all__ = [
    "LIMITS",
    "SANDBOX",
    "BoundedEnvironment",
    "TemplateLimitError",
    "TemplateLimits",
    "check_template",
    "compile_template",
    "render",
    "template_variables",
    "variables_of",
]

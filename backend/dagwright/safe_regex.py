"""Regular expressions written by users, run on RE2: matching takes time linear in the text,
whatever the pattern, so no pattern can backtrack for seconds (ReDoS) and hold the server.

Users keep writing Python's syntax. A pattern is parsed by Python's own parser of `re`
syntax (so its errors read as before, and every construct is recognised exactly) and written
out again in RE2's syntax. The translation keeps Python's meaning:

- ``\\d``, ``\\w``, ``\\s`` (and ``\\D``, ``\\W``, ``\\S``) match Unicode digits, word characters
  and spaces as in Python (RE2's own classes are ASCII-only); with the ASCII flag, ASCII ones.
- ``\\Z`` becomes RE2's ``\\z``; ``$`` without MULTILINE still also matches before a final
  newline, as in Python; ``(?x)`` verbose patterns and ``(?#...)`` comments work.
- Group numbers and names are Python's (names may be any Python identifier).
- IGNORECASE, MULTILINE and DOTALL, as flags or inline (``(?i)``, ``(?i:...)``).

What RE2 cannot do is refused with an error naming the construct: backreferences (``\\1``,
``(?P=name)``), lookahead and lookbehind (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), conditional
groups (``(?(1)...)``), atomic groups (``(?>...)``) and possessive quantifiers (``a*+``). RE2
also allows at most 1,000 repetitions in a counted repeat (``a{1001}`` is refused).

Remaining differences, documented where the blocks describe their patterns:

- ``\\b`` and ``\\B`` see only ASCII letters, digits and ``_`` as word characters (RE2 has no
  Unicode word boundary).
- After an empty match, the next match starts one character later (Python may also try a
  non-empty match at the same place): ``|a`` finds ['', ''] in 'a', Python ['', 'a', ''].
- A ``$`` followed by more pattern that must consume the final newline (``a$\\n``) does not
  match: nothing can follow the end of the text.

Cost. RE2 runs in time linear in the text, but its constant grows with the pattern: when its
DFA gives up (``a.{30}c`` on a long text) or groups must be captured, it steps through up to
one NFA state per pattern position (an atom after counted repeats are expanded: ``a.{30}c``
has 32) for each byte. So every search is bounded by ``len(text) * positions``: `INLINE_WORK`
for blocks that run on the server's event loop (``compare``, ``json_path``), `THREAD_WORK` in a
worker thread (where RE2 releases the GIL while it matches). A yes/no question or the whole
match needs no captures and runs on RE2's DFA alone.

Python's `re` stays for the project's own, fixed patterns.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2  # google-re2

from dagwright.errors import DagwrightError

# CPython's parser of `re` syntax (the module `re` itself compiles with), read as data.
_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

MAX_PATTERN_CHARS = 10_000
MAX_MATCHES = 100_000  # matches a find-all may return (a pattern matching '' matches everywhere)
MAX_FIND_SECONDS = 1.0  # CPU time of one find-all (each search is linear, not their sum)
# len(text) x pattern positions for one search (measured worst: ~40 ns a unit, with captures)
INLINE_WORK = 5_000_000  # on the event loop: about 0.2 s at worst
THREAD_WORK = 100_000_000  # in a worker thread, GIL released: about 4 s at worst
RE2_MAX_MEM = 4 << 20  # bytes for one compiled pattern and its matching caches
RE2_MAX_REPEAT = 1_000

IGNORECASE = re.IGNORECASE
MULTILINE = re.MULTILINE
DOTALL = re.DOTALL
_ALLOWED_FLAGS = IGNORECASE | MULTILINE | DOTALL


class RegexError(DagwrightError, ValueError):
    """A user's pattern that is not valid (``regex_invalid``), uses what RE2 cannot run
    (``regex_unsupported``) or is too large (``regex_limit``). A ValueError too, so that a
    config validator reports it as a problem of its node and field."""

    code = "regex_invalid"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class _Unsupported(Exception):
    def __init__(self, construct: str, code: str = "regex_unsupported", hint: str = "") -> None:
        super().__init__(construct)
        self.construct = construct
        self.code = code
        self.hint = hint


_ENGINE = "RE2 (the linear-time engine user patterns run on)"

# Python's Unicode classes in RE2's syntax (checked code point by code point in the tests).
_UNICODE_DIGIT = r"\p{Nd}"
_UNICODE_WORD = r"\p{L}\p{N}_"
_UNICODE_SPACE = (
    r"\x{9}-\x{d}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
    r"\x{202f}\x{205f}\x{3000}"
)
_ASCII_DIGIT = "0-9"
_ASCII_WORD = "0-9A-Za-z_"
_ASCII_SPACE = r"\x{9}-\x{d}\x{20}"


def _class_body(category: Any, ascii_only: bool) -> tuple[str, bool]:
    """The inside of a [...] class for a category, and whether it is the complement."""
    c = _c
    table = {
        c.CATEGORY_DIGIT: (_ASCII_DIGIT if ascii_only else _UNICODE_DIGIT, False),
        c.CATEGORY_NOT_DIGIT: (_ASCII_DIGIT if ascii_only else _UNICODE_DIGIT, True),
        c.CATEGORY_WORD: (_ASCII_WORD if ascii_only else _UNICODE_WORD, False),
        c.CATEGORY_NOT_WORD: (_ASCII_WORD if ascii_only else _UNICODE_WORD, True),
        c.CATEGORY_SPACE: (_ASCII_SPACE if ascii_only else _UNICODE_SPACE, False),
        c.CATEGORY_NOT_SPACE: (_ASCII_SPACE if ascii_only else _UNICODE_SPACE, True),
    }
    if category not in table:
        raise _Unsupported(f"the character class {category}")
    return table[category]


def _char(code: int) -> str:
    if 0xD800 <= code <= 0xDFFF:
        raise _Unsupported("a surrogate character (U+D800 to U+DFFF)")
    char = chr(code)
    return char if char.isascii() and char.isalnum() else f"\\x{{{code:x}}}"


def _flag_letters(flags: int) -> str:
    return "".join(
        letter
        for flag, letter in ((IGNORECASE, "i"), (MULTILINE, "m"), (DOTALL, "s"))
        if flags & flag
    )


class _Translator:
    """Writes a pattern parsed by Python's parser in RE2's syntax."""

    def __init__(self) -> None:
        self.next_group = 1  # the next RE2 group number
        self.group_map: dict[int, int] = {}  # Python group -> RE2 group
        self.newline_groups: list[int] = []  # RE2 groups of `$`'s optional final newline

    def capture(self) -> int:
        number = self.next_group
        self.next_group += 1
        return number

    def sequence(self, items: Any, flags: int) -> str:
        return "".join(self.item(op, av, flags) for op, av in items)

    def atom(self, items: Any, flags: int) -> str:
        """An item a quantifier can follow."""
        text = self.sequence(items, flags)
        if len(items) == 1 and items[0][0] in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return text
        if len(items) == 1 and items[0][0] == _c.SUBPATTERN:
            return text  # written with its own parentheses
        return f"(?:{text})"

    def item(self, op: Any, av: Any, flags: int) -> str:  # noqa: C901, PLR0912
        c = _c
        ascii_only = bool(flags & re.ASCII)
        if op == c.LITERAL:
            return _char(av)
        if op == c.NOT_LITERAL:
            return f"[^{_char(av)}]"
        if op == c.ANY:
            return "."
        if op == c.IN:
            return self.char_class(av, ascii_only)
        if op == c.BRANCH:
            return "(?:" + "|".join(self.sequence(alt, flags) for alt in av[1]) + ")"
        if op == c.SUBPATTERN:
            group, add, remove, inner = av
            scoped = (flags | add) & ~remove
            body = self.sequence(inner, scoped) if group is None else None
            letters_on = _flag_letters(add & _ALLOWED_FLAGS)
            letters_off = _flag_letters(remove & _ALLOWED_FLAGS)
            switch = letters_on + (f"-{letters_off}" if letters_off else "")
            if group is None:
                return f"(?{switch}:{body})"
            self.group_map[group] = self.capture()
            body = self.sequence(inner, scoped)
            return f"((?{switch}:{body}))" if switch else f"({body})"
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, inner = av
            for count in (low, high):
                if count != c.MAXREPEAT and count > RE2_MAX_REPEAT:
                    raise _Unsupported(
                        f"a repetition count of {count:,} (RE2 allows at most {RE2_MAX_REPEAT:,})",
                        code="regex_limit",
                    )
            text = self.atom(inner, flags)
            if (low, high) == (0, c.MAXREPEAT):
                quantifier = "*"
            elif (low, high) == (1, c.MAXREPEAT):
                quantifier = "+"
            elif (low, high) == (0, 1):
                quantifier = "?"
            elif high == c.MAXREPEAT:
                quantifier = f"{{{low},}}"
            elif low == high:
                quantifier = f"{{{low}}}"
            else:
                quantifier = f"{{{low},{high}}}"
            return text + quantifier + ("?" if op == c.MIN_REPEAT else "")
        if op == c.AT:
            return self.anchor(av, flags)
        if op == c.GROUPREF:
            raise _Unsupported("a backreference (\\1 or (?P=name))")
        if op == c.GROUPREF_EXISTS:
            raise _Unsupported("a conditional group ((?(1)yes|no))")
        if op in (c.ASSERT, c.ASSERT_NOT):
            direction, _inner = av
            kind = "lookahead" if direction == 1 else "lookbehind"
            negative = "negative " if op == c.ASSERT_NOT else ""
            syntax = {
                ("lookahead", ""): "(?=...)",
                ("lookahead", "negative "): "(?!...)",
                ("lookbehind", ""): "(?<=...)",
                ("lookbehind", "negative "): "(?<!...)",
            }[(kind, negative)]
            raise _Unsupported(f"a {negative}{kind} {syntax}")
        if op == getattr(c, "ATOMIC_GROUP", object()):
            raise _Unsupported("an atomic group (?>...)")
        if op == getattr(c, "POSSESSIVE_REPEAT", object()):
            raise _Unsupported("a possessive quantifier (*+, ++, ?+ or {m,n}+)")
        raise _Unsupported(f"the construct {op}")

    def anchor(self, at: Any, flags: int) -> str:
        c = _c
        if at == c.AT_BEGINNING:
            return "^"
        if at == c.AT_BEGINNING_STRING:
            return r"\A"
        if at == c.AT_END_STRING:
            return r"\z"
        if at == c.AT_END:
            if flags & MULTILINE:
                return "$"
            # Python's $ also matches before a final newline. Consume that newline in a group
            # of our own; `UserMatch` moves the ends of the match back before it.
            number = self.capture()
            self.newline_groups.append(number)
            return r"(\n?)\z"
        if at == c.AT_BOUNDARY:
            return r"\b"
        if at == c.AT_NON_BOUNDARY:
            return r"\B"
        raise _Unsupported(f"the anchor {at}")

    def char_class(self, items: Any, ascii_only: bool) -> str:  # noqa: C901, PLR0912
        c = _c
        negated = bool(items) and items[0][0] == c.NEGATE
        if negated:
            items = items[1:]
        inside: list[str] = []
        complements: list[str] = []  # bodies of classes this class also takes the complement of
        for op, av in items:
            if op == c.LITERAL:
                inside.append(_char(av))
            elif op == c.RANGE:
                inside.append(f"{_char(av[0])}-{_char(av[1])}")
            elif op == c.CATEGORY:
                body, complement = _class_body(av, ascii_only)
                if not complement:
                    inside.append(body)
                elif body == _UNICODE_DIGIT:
                    inside.append(r"\P{Nd}")
                else:
                    complements.append(body)
            else:
                raise _Unsupported(f"the class item {op}")
        if not complements:
            if not inside:
                return "[^\\x{0}-\\x{10ffff}]" if not negated else "[\\x{0}-\\x{10ffff}]"
            return f"[{'^' if negated else ''}{''.join(inside)}]"
        if not negated:
            parts = [f"[{''.join(inside)}]"] if inside else []
            parts += [f"[^{body}]" for body in complements]
            return "(?:" + "|".join(parts) + ")"
        # [^\W...]: characters of one class but none of the others. Only the common idioms
        # can be written in RE2 (it has no class intersection).
        if len(complements) == 1 and not inside:
            return f"[{complements[0]}]"
        underscore = _char(ord("_"))
        if complements == [_UNICODE_WORD] and set(inside) <= {_UNICODE_DIGIT, underscore}:
            letters = r"\p{L}\p{Nl}\p{No}" if _UNICODE_DIGIT in inside else r"\p{L}\p{N}"
            return f"[{letters}{'' if underscore in inside else '_'}]"
        if complements == [_ASCII_WORD] and set(inside) <= {_ASCII_DIGIT, underscore}:
            letters = "A-Za-z" if _ASCII_DIGIT in inside else "0-9A-Za-z"
            return f"[{letters}{'' if underscore in inside else '_'}]"
        raise _Unsupported(
            "a negated class combining \\W or \\S with other items (such as [^\\W\\s])",
            hint="name the characters wanted instead, e.g. [\\p{L}] for letters",
        )


def _positions(items: Any) -> int:
    """The pattern's atoms once counted repeats are expanded: a bound on the NFA states RE2 may
    step through for each byte of text (a Unicode class is one, however large its program)."""
    c = _c
    total = 0
    for op, av in items:
        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            total += 1
        elif op == c.BRANCH:
            total += sum(_positions(alt) for alt in av[1])
        elif op == c.SUBPATTERN:
            total += _positions(av[3])
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, inner = av
            times = max(low, 1) if high == c.MAXREPEAT else max(high, 1)
            total += times * _positions(inner)
        elif op == c.AT:
            total += 1
    return total


@dataclass(frozen=True, slots=True)
class _Translation:
    pattern: str  # RE2 syntax
    positions: int
    groups: int
    groupindex: Mapping[str, int]
    group_map: tuple[int, ...]  # RE2 group of each Python group (index 0: the whole match)
    newline_groups: tuple[int, ...]


def translate(pattern: str, flags: int = 0) -> _Translation:
    """Python `re` syntax to RE2 syntax; re.error for an invalid pattern, _Unsupported for a
    construct RE2 lacks."""
    parsed = _parser.parse(pattern, flags)
    state = parsed.state
    global_flags = state.flags | flags
    translator = _Translator()
    body = translator.sequence(parsed, global_flags)
    letters = _flag_letters(global_flags & _ALLOWED_FLAGS)
    text = f"(?{letters}){body}" if letters else body
    python_groups = state.groups - 1
    group_map = (0, *(translator.group_map[g] for g in range(1, python_groups + 1)))
    return _Translation(
        text,
        max(_positions(parsed), 1),
        python_groups,
        dict(state.groupdict),
        group_map,
        tuple(translator.newline_groups),
    )


# -- compiled patterns and their matches ----------------------------------------------------


class UserMatch:
    """A match, read like re.Match: group(n or name), span, start, end."""

    __slots__ = ("_regex", "_spans", "_text")

    def __init__(self, regex: UserRegex, text: str, spans: list[tuple[int, int]]) -> None:
        self._regex = regex
        self._text = text
        self._spans = spans

    def _index(self, group: int | str) -> int:
        if isinstance(group, str):
            if group not in self._regex.groupindex:
                raise IndexError(f"no such group: {group!r}")
            return self._regex.groupindex[group]
        if not 0 <= group < len(self._spans):
            raise IndexError(f"no such group: {group}")
        return group

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self._spans[self._index(group)]

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def group(self, group: int | str = 0) -> str | None:
        start, end = self.span(group)
        return None if start < 0 else self._text[start:end]

    def groups(self) -> tuple[str | None, ...]:
        return tuple(self.group(n) for n in range(1, self._regex.groups + 1))


@dataclass(frozen=True, slots=True, eq=False)
class UserRegex:
    """A user's pattern compiled for RE2, used like re.Pattern (search, finditer, groups,
    groupindex), each search bounded by `len(text) * positions` (`work_limit`)."""

    pattern: str
    flags: int
    translated: str
    positions: int
    groups: int
    groupindex: Mapping[str, int]
    _group_map: tuple[int, ...]
    _newline_groups: tuple[int, ...]
    _compiled: Any  # with the groups
    _plain: Any  # no groups: RE2's DFA alone

    def check_work(self, text: str, work_limit: int) -> None:
        """Refuse a text this pattern could take too long on (RE2's worst case)."""
        work = len(text) * self.positions
        if work > work_limit:
            longest = work_limit // self.positions
            raise RegexError(
                f"a text of {len(text):,} characters is too long for this pattern "
                f"({self.positions:,} positions, so at most {longest:,} characters here; "
                f"limit {work_limit:,} characters * positions)",
                code="regex_limit",
            )

    def _iterate(self, compiled: Any, subject: str | bytes, pos: int) -> Iterator[Any]:
        found: Iterator[Any] = (
            compiled.finditer(subject, pos) if pos else compiled.finditer(subject)
        )
        return found

    def _matches(self, text: str, limit: int, work_limit: int, groups: bool) -> Iterator[UserMatch]:
        self.check_work(text, work_limit)
        # Group 0 alone needs no captures, unless `$` must give back a final newline.
        compiled = self._compiled if groups or self._newline_groups else self._plain
        group_map = self._group_map if compiled is self._compiled else (0,)
        # An ASCII text goes to RE2 as bytes: its offsets are the characters' own, and the
        # wrapper then skips mapping byte offsets back to characters at every match (a third
        # of the cost, which decides how many matches fit in MAX_FIND_SECONDS).
        subject: str | bytes = text.encode("ascii") if text.isascii() else text
        try:
            found = self._iterate(compiled, subject, 0)
            match = next(found, None)
        except UnicodeEncodeError:
            # Lone surrogates cannot go to RE2 as UTF-8: match on a copy where each is U+FFFD
            # (one character for one, so the spans hold for the text itself).
            subject = _SURROGATE.sub("\ufffd", text)
            found = self._iterate(compiled, subject, 0)
            match = next(found, None)
        count = 0
        previous: tuple[int, int] | None = None
        started = time.thread_time()
        while match is not None:
            spans = self._spans_of(match, group_map)
            # The wrapper may find an empty match twice (when it did not start where the
            # search did): Python finds each match once.
            if spans[0] != previous or spans[0][0] != spans[0][1]:
                count += 1
                if count > limit:
                    raise RegexError(
                        f"the pattern matches more than {limit:,} times in the text "
                        f"(limit {limit:,})",
                        code="regex_limit",
                    )
                if not count % 64 and time.thread_time() - started > MAX_FIND_SECONDS:
                    raise RegexError(
                        f"finding every match took more than {MAX_FIND_SECONDS:g} s of CPU "
                        f"time (limit {MAX_FIND_SECONDS:g} s)",
                        code="regex_limit",
                    )
                yield UserMatch(self, text, spans)
                if spans[0][1] < match.end():
                    # `$` took the final newline, which Python leaves to the next search.
                    found = self._iterate(compiled, subject, spans[0][1])
            previous = spans[0]
            match = next(found, None)

    def _spans_of(self, match: Any, group_map: tuple[int, ...]) -> list[tuple[int, int]]:
        spans = [match.span(number) for number in group_map]
        for number in self._newline_groups:
            start, end = match.span(number)
            if start >= 0 and end - start == 1:  # `$` took the final newline: give it back
                return [(min(s, start), min(e, start)) if s >= 0 else (s, e) for s, e in spans]
        return spans

    def search(
        self, text: str, *, groups: bool = True, work_limit: int = THREAD_WORK
    ) -> UserMatch | None:
        """The first match (`groups=False`: of group 0 alone, which is quicker), or None."""
        return next(self._matches(text, 1, work_limit, groups), None)

    def contains_match(self, text: str, *, work_limit: int = THREAD_WORK) -> bool:
        """Whether the pattern occurs in the text (RE2's DFA alone: no captures)."""
        self.check_work(text, work_limit)
        try:
            return self._plain.search(text) is not None
        except UnicodeEncodeError:
            return self._plain.search(_SURROGATE.sub("\ufffd", text)) is not None

    def finditer(
        self,
        text: str,
        *,
        groups: bool = True,
        limit: int = MAX_MATCHES,
        work_limit: int = THREAD_WORK,
    ) -> Iterator[UserMatch]:
        """Every match, as Python's finditer (see the module's docstring for empty matches);
        a RegexError past `limit` matches or MAX_FIND_SECONDS of CPU time."""
        return self._matches(text, limit, work_limit, groups)


def _re2_options(capture: bool) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    options.never_capture = not capture
    return options


_OPTIONS = _re2_options(capture=True)
_PLAIN_OPTIONS = _re2_options(capture=False)
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class _Failure:
    message: str
    code: str


def _describe_re2_error(error: Exception) -> str:
    text = str(error.args[0] if error.args else error)
    if text.startswith("b'") or text.startswith('b"'):
        text = text[2:-1]
    if "pattern too large" in text:
        return (
            "is too large for RE2 once its repetitions are expanded "
            f"(at most {RE2_MAX_MEM >> 20} MB of program)"
        )
    if "repetition" in text:
        return (
            "has counted repetitions nested too deeply for RE2 (the product of nested "
            f"counts may not pass {RE2_MAX_REPEAT:,})"
        )
    return f"is refused by RE2: {text}"


@lru_cache(maxsize=256)
def _compile_cached(pattern: str, flags: int) -> UserRegex | _Failure:
    if len(pattern) > MAX_PATTERN_CHARS:
        return _Failure(
            f"is {len(pattern):,} characters long (limit {MAX_PATTERN_CHARS:,})", "regex_limit"
        )
    try:
        translation = translate(pattern, flags)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        return _Failure(f"is not a valid regular expression: {exc.msg}{where}", "regex_invalid")
    except (ValueError, OverflowError) as exc:  # e.g. conflicting flags
        return _Failure(f"is not a valid regular expression: {exc}", "regex_invalid")
    except RecursionError:
        return _Failure("nests too deeply to be parsed", "regex_limit")
    except _Unsupported as exc:
        if exc.code == "regex_limit":
            return _Failure(f"uses {exc.construct}", exc.code)
        hint = f"; {exc.hint}" if exc.hint else ""
        return _Failure(f"uses {exc.construct}, which {_ENGINE} does not support{hint}", exc.code)
    try:
        compiled = re2.compile(translation.pattern, _OPTIONS)
        plain = re2.compile(translation.pattern, _PLAIN_OPTIONS)
    except re2.error as exc:
        return _Failure(_describe_re2_error(exc), "regex_limit")
    return UserRegex(
        pattern,
        flags,
        translation.pattern,
        translation.positions,
        translation.groups,
        translation.groupindex,
        translation.group_map,
        translation.newline_groups,
        compiled,
        plain,
    )


def compile_user_regex(pattern: str, flags: int = 0, label: str = "pattern") -> UserRegex:
    """A user's pattern (Python syntax; flags among IGNORECASE, MULTILINE, DOTALL) compiled
    for RE2. A RegexError, its message starting with `label`, when it cannot be. Compiled
    patterns and failures are cached."""
    if flags & ~_ALLOWED_FLAGS:
        raise ValueError(f"unsupported regex flags: {flags & ~_ALLOWED_FLAGS}")
    compiled = _compile_cached(pattern, flags)
    if isinstance(compiled, _Failure):
        raise RegexError(f"{label} {compiled.message}", compiled.code)
    return compiled

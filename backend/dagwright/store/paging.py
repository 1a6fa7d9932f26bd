"""One page of a listing, and the one pagination policy every listing follows.

The policy, for every caller:
- an offset below 0 or past MAX_OFFSET, or a limit below 1, is the caller's mistake:
  `InputError` naming the field (the API answers 422 before a query is built: its query
  parameters are bounded by the same numbers, see api/schemas.py `Paging`);
- a limit above MAX_LIMIT from code (not from the API, which refuses it) is clamped to
  MAX_LIMIT: a caller that wants "everything" gets full pages and the page says its limit;
- an offset past the last item is not an error: the page is empty and `total` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from pydantic import ConfigDict
from sqlmodel import Session, func, select
from sqlmodel.sql.expression import SelectOfScalar

from dagwright.errors import InputError

T = TypeVar("T")
U = TypeVar("U")

# An offset past any real table (and past what a database integer holds).
MAX_OFFSET: Final = 1_000_000_000
MAX_LIMIT: Final = 200
DEFAULT_LIMIT: Final = 50


@dataclass(frozen=True, slots=True)
class Window:
    """Which items a page holds: `limit` of them after the first `offset`. Built with
    `window`, which applies the policy."""

    offset: int
    limit: int


def window(offset: int = 0, limit: int = DEFAULT_LIMIT) -> Window:
    """The window of a listing call, checked and clamped by the policy above."""
    if not 0 <= offset <= MAX_OFFSET:
        raise InputError(f"offset: must be between 0 and {MAX_OFFSET}, not {offset}")
    if limit < 1:
        raise InputError(f"limit: must be 1 or more, not {limit}")
    return Window(offset, min(limit, MAX_LIMIT))


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Items of one window of a listing, with the count of every match."""

    # Returned as a response model, the page is validated again, so that each item (a table
    # row) becomes the API's schema of it and only the fields that schema names leave.
    __pydantic_config__ = ConfigDict(revalidate_instances="always")

    items: list[T]
    total: int  # every match, not only this page
    offset: int
    limit: int

    def map(self, convert: Callable[[T], U]) -> Page[U]:
        """The same page with each item converted (a record to its JSON form, say)."""
        return Page([convert(item) for item in self.items], self.total, self.offset, self.limit)


def fetch_page(db: Session, query: SelectOfScalar[T], at: Window) -> Page[T]:
    """One page of `query` (ordered by the caller) and the count of all its rows, in `db`."""
    total = db.exec(select(func.count()).select_from(query.order_by(None).subquery())).one()
    items = db.exec(query.offset(at.offset).limit(at.limit)).all()
    return Page(list(items), int(total), at.offset, at.limit)

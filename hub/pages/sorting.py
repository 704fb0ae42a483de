"""Tables sorted on the hub by `?sort=<column>` (`?sort=-<column>`: descending), so a header
link sorts without a script. A page sorts the rows it shows; a paged table says so.

Each table names its columns and how a row reads in each; values that are None sort last
either way, and ties keep the order the service answered with.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from hub.errors import InvalidInput

__all__ = ["Sorted", "Table"]

Row = TypeVar("Row")


@dataclass(frozen=True, slots=True)
class Sorted:
    """How a table is sorted now: the column (None: as the service answered) and direction."""

    column: str | None
    descending: bool = False

    def toggle(self, column: str) -> str:
        """The `sort` value of a header link: that column ascending, or flipped if current."""
        return f"-{column}" if self.column == column and not self.descending else column

    def direction(self, column: str) -> str | None:
        """`aria-sort` of the column's header cell."""
        if self.column != column:
            return None
        return "descending" if self.descending else "ascending"


@dataclass(frozen=True, slots=True)
class Table:
    """A sortable table: its columns and how a row reads in each."""

    columns: Mapping[str, Callable[[Any], Any]]

    def parse(self, sort: str | None) -> Sorted:
        if not sort:
            return Sorted(None)
        column = sort.removeprefix("-")
        if column not in self.columns:
            known = ", ".join(self.columns)
            raise InvalidInput(f"sort: no column {column!r} to sort by (columns: {known})")
        return Sorted(column, descending=sort.startswith("-"))

    def sort(self, rows: Iterable[Row], order: Sorted) -> list[Row]:
        listed = list(rows)
        if order.column is None:
            return listed
        value = self.columns[order.column]
        known = [row for row in listed if value(row) is not None]
        unknown = [row for row in listed if value(row) is None]
        return sorted(known, key=value, reverse=order.descending) + unknown

"""Tables a page shows whole, sorted on the hub by `?sort=<column>` (`?sort=-<column>`:
descending), so that a header link sorts without a script. A paged table is sorted by its
listing's query instead (hub/sorting.py), so that page 2 follows page 1.

Each table names its columns and how a row reads in each; values that are None sort last
either way, and ties keep the order the service answered with.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from hub.sorting import Order

__all__ = ["Table"]

Row = TypeVar("Row")


@dataclass(frozen=True, slots=True)
class Table:
    """A sortable table: its columns and how a row reads in each."""

    columns: Mapping[str, Callable[[Any], Any]]

    def sort(self, rows: Iterable[Row], order: Order) -> list[Row]:
        listed = list(rows)
        if order.column is None:
            return listed
        value = self.columns[order.column]
        known = [row for row in listed if value(row) is not None]
        unknown = [row for row in listed if value(row) is None]
        return sorted(known, key=value, reverse=order.descending) + unknown

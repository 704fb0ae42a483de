"""Tables a page shows whole, sorted on the hub by `?sort=<column>` (or `-<column>`), so a header
link sorts without a script; paged tables sort in their query (hub/sorting.py). Each table
names its columns and how a row reads in each; None sorts last either way, and ties keep the
service's order.
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

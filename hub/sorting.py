"""The order a listing is asked for: `sort=<column>`, or `sort=-<column>` for descending (checked
against the listing's columns by `hub.deps.sort_order`). A paged listing sorts in its query, so
page 2 follows page 1; a table a page shows whole sorts in Python (hub/pages/sorting.py).
"""

from dataclasses import dataclass

__all__ = ["OWN_ORDER", "Order"]


@dataclass(frozen=True, slots=True)
class Order:
    """A column (None: the listing's own order) and its direction."""

    column: str | None = None
    descending: bool = False

    def toggle(self, column: str) -> str:
        """The `sort` value that orders by the column: ascending, or flipped if current."""
        return f"-{column}" if self.column == column and not self.descending else column

    def direction(self, column: str) -> str | None:
        """How the listing runs along the column: ascending, descending or None (not by it)."""
        if self.column != column:
            return None
        return "descending" if self.descending else "ascending"


# No column: the listing's own order.
OWN_ORDER = Order()

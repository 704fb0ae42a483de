"""The cost meter: what a render spends, in cost units and in time, against what it may.

Function calls and evaluation steps charge one `Meter` per render; the costs they charge are in
docs/contributing.md ("The template engine"). Time is the caller's: a meter made with a
`clock` and a `timeout` fails the render once that clock passes the deadline.
"""

from collections.abc import Callable
from typing import Final, Literal

__all__ = ["CHARS_PER_UNIT", "CLOCK_EVERY", "STEP_UNITS", "UNMETERED", "Meter", "OverBudget"]

STEP_UNITS: Final = 4
CHARS_PER_UNIT: Final = 4
# Cost units between two readings of the clock: about a millisecond of work.
CLOCK_EVERY: Final = 1_000

Limit = Literal["cost", "time"]


class OverBudget(Exception):
    """A render spent more than its budget (`limit` "cost") or outlived its deadline ("time")."""

    def __init__(self, message: str, limit: Limit) -> None:
        super().__init__(message)
        self.message = message
        self.limit: Limit = limit


class Meter:
    """Cost units spent against `budget` and, with a `clock`, time against `timeout` seconds
    from the meter's making."""

    __slots__ = ("_clock", "_deadline", "_exhausted", "_next_check", "budget", "spent", "timeout")

    def __init__(
        self,
        budget: int,
        *,
        clock: Callable[[], float] | None = None,
        timeout: float | None = None,
    ) -> None:
        if (clock is None) != (timeout is None):
            raise ValueError("a meter's clock and timeout are given together")
        if budget < 0 or (timeout is not None and timeout <= 0):
            raise ValueError("a meter's budget and timeout must be positive")
        self.budget = budget
        self.timeout = timeout
        self.spent = 0
        self._clock = clock
        self._deadline = None if clock is None or timeout is None else clock() + timeout
        self._exhausted: OverBudget | None = None
        self._next_check = budget if clock is None else min(budget, CLOCK_EVERY)

    @property
    def exhausted(self) -> OverBudget | None:
        """Why the meter refuses any more work, once it does."""
        return self._exhausted

    def charge(self, units: int) -> None:
        """Spends `units`; OverBudget when that is more than the budget, or time is up."""
        self.spent += units
        if self.spent > self._next_check:
            self._check()

    def elements(self, count: int) -> None:
        """Charges for `count` elements touched."""
        self.spent += count
        if self.spent > self._next_check:
            self._check()

    def chars(self, count: int) -> None:
        """Charges for `count` characters read or written."""
        self.spent += count // CHARS_PER_UNIT
        if self.spent > self._next_check:
            self._check()

    def _check(self) -> None:
        if self._exhausted is None:
            if self.spent > self.budget:
                self._exhausted = OverBudget(
                    f"exceeded the budget of {self.budget} cost units (evaluation steps, "
                    f"elements touched, characters read or written)",
                    "cost",
                )
            elif self._clock is not None and self._deadline is not None:
                if self._clock() > self._deadline:
                    seconds = f"{self.timeout:g} second{'' if self.timeout == 1 else 's'}"
                    self._exhausted = OverBudget(f"exceeded the time limit of {seconds}", "time")
                else:
                    self._next_check = min(self.budget, self.spent + CLOCK_EVERY)
                    return
            else:
                self._next_check = self.budget
                return
        raise OverBudget(self._exhausted.message, self._exhausted.limit)


class _Unmetered(Meter):
    """A meter that counts nothing: for what the engine does outside a render's work
    (describing a value in an error message)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(0)

    def charge(self, units: int) -> None:
        pass

    def elements(self, count: int) -> None:
        pass

    def chars(self, count: int) -> None:
        pass


UNMETERED: Final[Meter] = _Unmetered()

"""Failed sign-ins per client address, kept in the process's memory: past a limit the sign-in
form refuses further tries from that address for a while, so a token cannot be guessed at the
speed of the network. Per process (each replica and worker counts its own), and for a bounded
number of addresses: when full, the address quiet the longest is forgotten first."""

from collections import OrderedDict, deque
from datetime import datetime, timedelta
from math import ceil

MAX_FAILURES = 10
WINDOW = timedelta(minutes=5)
MAX_ADDRESSES = 10_000


class FailedSignIns:
    def __init__(
        self,
        *,
        limit: int = MAX_FAILURES,
        window: timedelta = WINDOW,
        capacity: int = MAX_ADDRESSES,
    ) -> None:
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self._failures: OrderedDict[str, deque[datetime]] = OrderedDict()

    def retry_after(self, address: str, now: datetime) -> int | None:
        """Seconds until the address may try again; None while it may."""
        failures = self._recent(address, now)
        if len(failures) < self.limit:
            return None
        return max(1, ceil((failures[0] + self.window - now).total_seconds()))

    def record(self, address: str, now: datetime) -> None:
        failures = self._recent(address, now)
        failures.append(now)
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > self.capacity:
            self._failures.popitem(last=False)

    def _recent(self, address: str, now: datetime) -> deque[datetime]:
        """The address's failures within the window (at most `limit`, the newest)."""
        failures = self._failures.get(address) or deque(maxlen=self.limit)
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures

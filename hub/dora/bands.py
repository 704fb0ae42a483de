"""DORA performance bands: where each of the four figures of the DORA report (hub/dora/schemas.py
EnvironmentDora) places an environment, elite, high, medium or low.

The bounds, from the Accelerate State of DevOps report 2023, are in docs/grafana.md ("DORA
bands"). A figure at least as good as a band's bound is in that band (or a better one).
"""

from dataclasses import dataclass
from enum import StrEnum

from hub.palette import Colour

__all__ = ["BANDS", "COLOURS", "Band", "Bounds"]


class Band(StrEnum):
    ELITE = "elite"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True, slots=True)
class Bounds:
    """Where the elite, high and medium bands end, in the figure's unit."""

    higher_is_better: bool
    elite: float
    high: float
    medium: float

    def bands(self) -> tuple[tuple[float, Band], ...]:
        """The bounds, best first, each with the band a figure as good as it is in."""
        return ((self.elite, Band.ELITE), (self.high, Band.HIGH), (self.medium, Band.MEDIUM))


_HOUR = 3600.0
_DAY = 24 * _HOUR
# By the figure's name in the DORA report: deployments per day, seconds, a share.
BANDS = {
    "deployments_per_day": Bounds(higher_is_better=True, elite=1.0, high=1 / 7, medium=1 / 30),
    "lead_time": Bounds(higher_is_better=False, elite=_DAY, high=7 * _DAY, medium=30 * _DAY),
    "change_failure_rate": Bounds(higher_is_better=False, elite=0.05, high=0.10, medium=0.15),
    "time_to_restore": Bounds(higher_is_better=False, elite=_HOUR, high=_DAY, medium=7 * _DAY),
}
# Each band in the colours of hub.palette, best to worst.
COLOURS: dict[Band, Colour] = {
    Band.ELITE: "ok",
    Band.HIGH: "progress",
    Band.MEDIUM: "warn",
    Band.LOW: "bad",
}

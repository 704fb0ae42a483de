"""The one palette every view of a state draws from: the pages' badges (custom properties of the
same names in hub/pages/static/fleetmark.css) and the dashboards' thresholds. Keys are the words
the API answers with, one meaning each; a state is always drawn with its word as well, for a
reader who cannot tell the colours apart.
"""

from typing import Literal

__all__ = ["HEX", "PALETTE", "STATES", "Colour", "colour"]

Colour = Literal["ok", "progress", "warn", "bad", "idle"]
# What each colour says: in order from good to bad, then out of the picture.
PALETTE: dict[Colour, str] = {
    "ok": "as it should be",
    "progress": "on its way: only time stands between it and ok",
    "warn": "needs a look: behind, silent, or not judged yet",
    "bad": "failed: someone has to act",
    "idle": "out of service or not concerned",
}
# Each colour as the pages draw it (fleetmark.css's custom property of its name) and the
# dashboards' thresholds and value mappings draw it.
HEX: dict[Colour, str] = {
    "ok": "#1a7f37",
    "progress": "#0550ae",
    "warn": "#7d4e00",
    "bad": "#b3261e",
    "idle": "#57606a",
}

STATES: dict[str, Colour] = {
    # The gate's verdicts, and the promotion view's soaking pending one.
    "passed": "ok",
    "soaking": "progress",
    "pending": "warn",
    "failed": "bad",
    # The gate's cluster states (soaking above).
    "compliant": "ok",
    "not_ready": "warn",
    "not_applied": "warn",
    "unknown_revision": "warn",
    "never_reported": "warn",
    "stale": "warn",
    # Agents and clusters.
    "reporting": "ok",
    "decommissioned": "idle",
    # Drift reasons (stale, not_applied and unknown_revision above).
    "behind": "warn",
    "diverged": "bad",
    "failing": "bad",
    "config_mismatch": "warn",
    "live_drift": "warn",
    "in_sync": "ok",
    # Environment diff cells (failing, in_sync above).
    "drifted": "warn",
    "not_reporting": "warn",
    "no_clusters": "idle",
    "not_assigned": "idle",
    # Why environments differ (not_assigned, diverged, failed, drifted above).
    "awaiting_promotion": "progress",
    "pinned": "idle",
    "config": "warn",
    # Rollouts (failed above).
    "in_progress": "progress",
    "converged": "ok",
    "stalled": "warn",
    # Readiness of a reconciler object.
    "ready": "ok",
    "progressing": "progress",
    "suspended": "idle",
}


def colour(state: str) -> Colour:
    """The colour of a state word; a word the palette does not know is a mistake in code."""
    try:
        return STATES[state]
    except KeyError:
        raise ValueError(f"state {state!r} has no colour in hub.palette.STATES") from None

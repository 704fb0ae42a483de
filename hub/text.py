"""Text the hub writes for people: times to the second and commits by their short hash, alike
on the pages, in the API's explanations and in the CLI. Durations are written and read by
hub/client/text.py, which the light client install carries too."""

from datetime import UTC, datetime

__all__ = ["format_time", "short_sha"]

# Characters of a commit hash shown where a whole one would crowd the text.
SHORT_SHA = 12


def format_time(moment: datetime) -> str:
    """`2026-11-26 22:15:00 UTC`: to the second, as the pages and the CLI print times."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def short_sha(sha: str) -> str:
    return sha[:SHORT_SHA]

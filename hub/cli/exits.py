"""What every command's exit code says, grep-style: one table for all (`fleetmark --help`)."""

from enum import IntEnum


class ExitCode(IntEnum):
    """What every command's exit code says, grep-style (EXIT_CODES words it for --help)."""

    ANSWER = 0
    NO = 1
    NO_ANSWER = 2
    PENDING = 3


EXIT_CODES = "\n\n".join(
    (
        "Exit codes, the same for every command:",
        "0  an answer: done, a gate passed, nothing drifted.",
        '1  a "no": a gate failed, drift found (drift --exit-code), assignments that failed '
        "to schedule.",
        "2  no answer: a usage error, an unknown name, an unreachable hub or store, refused "
        "credentials.",
        "3  still pending: gate wait timed out before the gate passed or failed.",
    )
)

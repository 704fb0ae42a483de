"""CLI start-up benchmark: how long `fleetmark` takes before it does anything.

Each command runs as a process of its own, and the median of `--runs` (5) is printed beside
`python -c pass`, the floor no command goes below (docs/benchmarks.md, "Command line
start-up"). `--fleetmark PATH` measures another build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"fleetmark --version": 0.5, "fleetmark --help": 1.0}


def _environment(**variables: str) -> dict[str, str]:
    kept = {key: value for key, value in os.environ.items() if not key.startswith("FLEETMARK_")}
    return kept | variables


def cases(fleetmark: str) -> list[tuple[str, list[str], dict[str, str]]]:
    completion = _environment(
        _FLEETMARK_COMPLETE="complete_bash", COMP_WORDS="fleetmark dr", COMP_CWORD="1"
    )
    return [
        ("python -c pass", [sys.executable, "-c", "pass"], _environment()),
        ("fleetmark --version", [fleetmark, "--version"], _environment()),
        ("fleetmark --help", [fleetmark, "--help"], _environment()),
        ("completion of `fleetmark dr`", [fleetmark], completion),
        ("fleetmark drift --help", [fleetmark, "drift", "--help"], _environment()),
        (
            "python -c 'import hub.client'",
            [sys.executable, "-c", "import hub.client"],
            _environment(),
        ),
    ]


def seconds(command: list[str], environment: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command.")
    parser.add_argument(
        "--fleetmark",
        default=str(Path(sys.executable).parent / "fleetmark"),
        help="The entry point to measure.",
    )
    args = parser.parse_args()

    measured = cases(args.fleetmark)
    # One run of each first, unmeasured: the files are in the page cache for every command.
    for _, command, environment in measured:
        seconds(command, environment)
    medians = {}
    for name, command, environment in measured:
        medians[name] = statistics.median(seconds(command, environment) for _ in range(args.runs))
    floor = medians["python -c pass"]
    print(f"median of {args.runs} runs, {sys.executable}")
    for name, median in medians.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else f"  target < {target:.1f} s: "
        if target is not None:
            verdict += "met" if median < target else "MISSED"
        print(f"{name:32} {median:6.3f} s  (+{median - floor:.3f} s over python){verdict}")


if __name__ == "__main__":
    main()

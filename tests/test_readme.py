"""Every command on a newcomer's path runs as written: each fenced `sh` block of README.md and
of the docs' tutorial pages, unless marked `<!-- not run: reason -->` just above it.

Blocks run in bash, in a folder of their own holding `.venv` (this checkout's virtualenv) and
with a HOME of their own, so `~/.local/share/fleetmark` is the test's. `fleetmark demo` and
`fleetmark serve` are started by the test (on free ports, the demo with `--fast`) and the
blocks after each run against it, `127.0.0.1:8080` read as its port; the demo's
`<read token the demo printed>` is the one it printed. Compose and Helm commands go to the
validators tests/deploy uses.
"""

import itertools
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator

from tests.conftest import DatabaseServer
from tests.demo_run import STORY_TIMEOUT, TOLD
from tests.served import FLEETMARK, Running, ServedHub, free_port, wait_until_up

ROOT = Path(__file__).resolve().parents[1]
# The docs' tutorials: pages whose commands a reader types against the README's demo.
TUTORIALS = [ROOT / "docs" / "concepts.md"]
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->")
LONG_RUNNING = re.compile(r"^\.venv/bin/fleetmark (demo|serve)$")
READ_TOKEN = "<read token the demo printed>"
DEFAULT_ADDRESS = "127.0.0.1:8080"
BLOCK_TIMEOUT = 120.0


@dataclass
class Block:
    source: str  # file:line
    text: str

    @property
    def long_running(self) -> str | None:
        found = LONG_RUNNING.match(self.text.strip())
        return found[1] if found else None


def blocks(path: Path) -> Iterator[Block]:
    """The fenced `sh` blocks of `path` not marked as not run."""
    text = path.read_text()
    for found in BLOCK.finditer(text):
        before = text[: found.start()].rstrip().rsplit("\n", 1)[-1]
        if before.startswith("<!-- not run"):
            assert NOT_RUN.fullmatch(before), f"{path.name}: a not-run mark without a reason"
            continue
        line = text.count("\n", 0, found.start()) + 1
        yield Block(f"{path.relative_to(ROOT)}:{line}", found[1])


def script(session: list[Block], port: int, placeholders: dict[str, str]) -> str:
    """One bash script running `session`'s blocks in order, each announced by a line naming
    it (the last such line before a failure names the block that failed)."""
    lines = ["set -eo pipefail"]
    for block in session:
        text = block.text.replace(DEFAULT_ADDRESS, f"127.0.0.1:{port}")
        for placeholder, value in placeholders.items():
            text = text.replace(placeholder, value)
        assert "<" not in re.sub(r"<\(|<<|<'|<\"", "", text), f"{block.source}: a placeholder"
        lines += [f"echo '### {block.source}'", text]
    return "\n".join(lines)


def run_session(session: list[Block], port: int, workdir: Path, **placeholders: str) -> str:
    result = subprocess.run(
        ["bash", "-c", script(session, port, placeholders)],
        cwd=workdir,
        env=user_environment(workdir),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


def user_environment(home: Path, **variables: str) -> dict[str, str]:
    """A newcomer's environment: no fleetmark settings, no XDG folders, HOME the test's."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLEETMARK_", "XDG_")) and key != "VIRTUAL_ENV"
    }
    return {**environment, "HOME": str(home), **variables}


@contextmanager
def started(command: list[str], environment: dict[str, str], log: Path) -> Iterator[Running]:
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=environment["HOME"], env=environment, stdout=sink, stderr=sink
        )
    running = Running(process, log)
    try:
        yield running
    finally:
        running.stop()


def helm_problems(block: Block) -> list[str]:
    """What `helm install` in `block` would be refused for: the chart rendered with its
    `--set` values by Helm's SDK, and every object validated as tests/deploy does."""
    from tests.deploy import charts
    from tests.deploy.test_charts_valid import NEWEST, problems

    words = shlex.split(block.text.replace("\\\n", " "))
    chart = ROOT / words[3]
    values: dict[str, Any] = {}
    for word, value in itertools.pairwise(words):
        if word == "--set":
            key, _, setting = value.partition("=")
            set_value(values, key, yaml.safe_load(setting))
    found = [str(problem) for problem in charts.lint_problems(chart, values)]
    for document in charts.render(chart, values):
        found += problems(document, NEWEST)
    return found


def set_value(values: dict[str, Any], key: str, value: Any) -> None:
    """`helm --set key=value`: dotted keys, `name[0]` list items."""
    parts = re.findall(r"([^.\[\]]+)|\[(\d+)\]", key)
    target: Any = values
    path = [int(index) if index else name for name, index in parts]
    for part, following in zip(path, [*path[1:], None], strict=True):
        empty: Any = [] if isinstance(following, int) else {}
        if following is None:
            if isinstance(part, int):
                target.extend([None] * (part + 1 - len(target)))
            target[part] = value
        elif isinstance(part, int):
            target.extend([{}] * (part + 1 - len(target)))
            target = target[part]
        else:
            target = target.setdefault(part, empty)


def compose_problems(block: Block) -> list[str]:
    """What `docker compose` in `block` would be refused for: the compose file against the
    Compose Specification, the profile it names, the script it runs."""
    schema = json.loads((ROOT / "tests" / "data" / "compose" / "compose-spec.json").read_text())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    found = [error.message for error in Draft7Validator(schema).iter_errors(compose)]
    profiles = {p for service in compose["services"].values() for p in service.get("profiles", [])}
    found += [
        f"no service has the profile {name}"
        for name in re.findall(r"--profile (\S+)", block.text)
        if name not in profiles
    ]
    found += [
        f"{script} is not in the repository"
        for script in re.findall(r"^sh (\S+)", block.text, re.MULTILINE)
        if not (ROOT / script).is_file()
    ]
    return found


def test_every_compose_and_helm_command_is_valid() -> None:
    checked = 0
    for path in [ROOT / "README.md", *TUTORIALS]:
        for block in blocks(path):
            if "helm install" in block.text:
                assert helm_problems(block) == [], block.source
                checked += 1
            elif "docker compose" in block.text:
                assert compose_problems(block) == [], block.source
                checked += 1
    assert checked >= 3


def test_the_readme_and_the_tutorials_run_as_written(
    tmp_path: Path, database_server: DatabaseServer
) -> None:
    readme = [
        block
        for block in blocks(ROOT / "README.md")
        if not ("helm install" in block.text or "docker compose" in block.text)
    ]
    starts = {block.long_running: index for index, block in enumerate(readme)}
    assert set(starts) >= {"demo", "serve", None}
    assert starts["demo"] < starts["serve"], "the README shows the demo before the hub"
    on_demo = readme[starts["demo"] + 1 : starts["serve"]] + [
        block for page in TUTORIALS for block in blocks(page)
    ]
    on_hub = readme[starts["serve"] + 1 :]
    assert not any(block.long_running for block in on_demo + on_hub)

    home = tmp_path / "home"
    home.mkdir()
    (home / ".venv").symlink_to(Path(FLEETMARK).parents[1])
    with ExitStack() as stack:
        demo_port = free_port()
        demo = stack.enter_context(
            started(
                [".venv/bin/fleetmark", "demo", "--fast", "--port", str(demo_port)],
                user_environment(home),
                tmp_path / "demo.log",
            )
        )
        hub_port = free_port()
        serving = stack.enter_context(
            started(
                [".venv/bin/fleetmark", "serve", "--port", str(hub_port)],
                user_environment(
                    home, FLEETMARK_DATABASE_URL=stack.enter_context(fresh(database_server))
                ),
                tmp_path / "hub.log",
            )
        )
        wait_until_up(ServedHub(serving.process, serving.log, f"http://127.0.0.1:{hub_port}"))

        output = run_session(on_hub, hub_port, home)
        assert '{"status":"ok"}' in output
        assert '"accepted":1' in output

        output = run_session(on_demo, demo_port, home, **{READ_TOKEN: read_token(demo)})
        assert "gate passed" in output
        # The events the README says the demo prints as they arrive.
        assert re.search(r"^\S+ event fleetmark\.\S+ \S+$", demo.output(), re.MULTILINE)


@contextmanager
def fresh(database_server: DatabaseServer) -> Iterator[str]:
    url = database_server.create_database()
    try:
        yield url
    finally:
        database_server.discard(url)


def read_token(demo: Running) -> str:
    """The read token the demo printed, once its story is told."""
    deadline = time.monotonic() + STORY_TIMEOUT
    while TOLD not in demo.output():
        assert demo.process.poll() is None, f"the demo exited:\n{demo.output()}"
        assert time.monotonic() < deadline, demo.output()
        time.sleep(0.2)
    found = re.search(r"FLEETMARK_TOKEN=(\S+)", demo.output())
    assert found is not None, demo.output()
    return found[1]

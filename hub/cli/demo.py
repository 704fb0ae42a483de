"""`fleetmark demo`: the reference scenario told in a few minutes, through a hub's API with an
admin token, as an operator would: to a hub of its own, or to a running one (`--hub`), which
reads the repositories over git's HTTP protocol from the demo (`--git-listen`). It writes the
scenario's repositories, has the hub schedule and harvest them, runs the simulated fleet, then
tells the story until Ctrl-C or SIGTERM. Its own hub's events go to a receiver of the demo's,
which prints each as it arrives.
"""

import asyncio
import hmac
import json
import logging
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import httpx
import typer
import uvicorn
from pydantic import ValidationError
from rich.markup import escape

from hub.app import create_app
from hub.cli.common import DataDirOption, PortOption, check_port, load_settings, open_database
from hub.cli.output import console, fail
from hub.cli.secret_files import read_secret_file
from hub.cli.simulate import register_fleet, report_round
from hub.cli.target import Remote
from hub.client import HubClient
from hub.client.schemas.runs import RequestedRun
from hub.database import create_engine, create_sessionmaker, write_session
from hub.demo.gitserver import GitServer
from hub.demo.receiver import EventReceiver
from hub.demo.repos import GitCommandError
from hub.demo.story import ENVIRONMENTS, STEPS, DemoRepositories, Step, demo_fleet
from hub.events.webhooks import signature
from hub.git.urls import normalise_repository_url
from hub.http import DeadlineHttpToolsProtocol
from hub.logs import configure_logging
from hub.settings import HubSettings
from hub.simulation import Simulation
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest

# A file the demo leaves in its data directory: only such a directory is emptied by a new run.
MARKER = "fleetmark-demo"
TIMEOUT = 10.0
# Seconds a harvest may keep failing (the hub's own harvest holding its lock) before the demo
# gives up, and between two polls of a run it asked for.
HARVEST_PATIENCE = 60.0
POLL = 0.1
# The one repository the hub's scheduler pushes to.
PUSHED = "platform-gitops"


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast the story goes."""

    report_every: float  # seconds between two reports of a cluster
    between_steps: float  # seconds from one step of the story to the next
    stale_after: int  # seconds of silence after which a cluster is stale
    jobs: float  # seconds between the hub's drift, gate, environment diff and harvest runs
    soak: int  # seconds a gate wants every cluster Ready on a commit
    drift_grace: int  # seconds an environment's drift lasts before it is announced

    def settling(self) -> float:
        """Seconds after the last step until its effects show: the silent cluster stale, and
        the drift and environment diff jobs having seen it all."""
        return self.stale_after + 2 * self.jobs

    def telling(self) -> float:
        return len(STEPS) * self.between_steps + self.settling()


NORMAL = Pace(
    report_every=3.0, between_steps=30.0, stale_after=45, jobs=5.0, soak=60, drift_grace=60
)
FAST = Pace(report_every=0.3, between_steps=2.5, stale_after=3, jobs=1.0, soak=5, drift_grace=5)
# How often the demo's hub sends its events to the demo's receiver, in seconds.
EVENTS_EVERY = 1.0
# The subscription of the demo's receiver.
SUBSCRIPTION = "demo"


def demo(
    port: PortOption = None,
    data_dir: DataDirOption = None,
    fast: Annotated[
        bool, typer.Option("--fast", help="Tell the story in seconds rather than minutes.")
    ] = False,
    clusters_per_type: Annotated[
        int, typer.Option(min=2, max=10, help="Clusters of each cluster type per environment.")
    ] = 2,
    hub: Annotated[
        str | None,
        typer.Option(
            help="Tell the story to this running hub (its URL) instead of a hub of the "
            "demo's own; needs --token-file and --git-listen.",
            show_default=False,
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(help="With --hub: a file holding an admin token of it.", show_default=False),
    ] = None,
    git_listen: Annotated[
        str | None,
        typer.Option(
            help="With --hub: HOST:PORT where the demo serves its repositories to that hub "
            "over git's HTTP protocol.",
            show_default=False,
        ),
    ] = None,
    git_url: Annotated[
        str | None,
        typer.Option(
            help="With --hub: the URL that hub reaches --git-listen at (default http://HOST:PORT).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show fleetmark at work: the reference scenario's repositories, a hub, a simulated fleet.

    Everything lives in the data directory (default: a `demo` folder in fleetmark's user data
    directory), which each run starts afresh. Ctrl-C stops it all.
    """
    pace = FAST if fast else NORMAL
    remote_only = {"--token-file": token_file, "--git-listen": git_listen, "--git-url": git_url}
    running: tuple[Remote, tuple[str, int]] | None = None
    if hub is None:
        given = [name for name, value in remote_only.items() if value is not None]
        if given:
            raise fail(f"{', '.join(given)}: only with --hub (a running hub to tell the story to)")
    elif port is not None:
        raise fail("--port is the port of the demo's own hub: with --hub it starts none")
    else:
        running = (Remote(hub, _admin_token(token_file)), _address(git_listen))
    root = _fresh_directory(data_dir or load_settings().data_dir / "demo")
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if running is None:
        _own_hub(root, port, pace, clusters_per_type, stopping)
        console.print("demo stopped: the fleet, the hub and its database", highlight=False)
    else:
        remote, listen = running
        _running_hub(root, remote, pace, clusters_per_type, stopping, listen, git_url)
        console.print("demo stopped: the fleet and the repositories' server", highlight=False)


def _admin_token(token_file: Path | None) -> str:
    if token_file is None:
        raise fail("--hub needs --token-file: a file holding an admin token of that hub")
    return read_secret_file(token_file, "--token-file")


def _address(listen: str | None) -> tuple[str, int]:
    if listen is None:
        raise fail("--hub needs --git-listen HOST:PORT: where that hub fetches the repositories")
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise fail(f"--git-listen must be HOST:PORT, such as 0.0.0.0:8000; got {listen!r}")
    check_port(host, int(port), "--git-listen")
    return host, int(port)


def _fresh_directory(root: Path) -> Path:
    """`root`, emptied when an earlier demo made it; refused when it holds anything else."""
    root = root.expanduser().resolve()
    if root.exists() and any(root.iterdir()):
        if not (root / MARKER).exists():
            raise fail(
                f"--data-dir {root}: holds something other than a fleetmark demo; "
                "give an empty or new directory"
            )
        if (root / "postgres" / "postmaster.pid").exists():
            raise fail(f"--data-dir {root}: a demo is running there already; stop it first")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("Made by `fleetmark demo`; its next run empties this directory.\n")
    return root


def _settings(root: Path, pace: Pace, port: int | None) -> HubSettings:
    """The embedded PostgreSQL in `root`, whatever FLEETMARK_DATABASE_URL says, and the hub's
    jobs at the story's pace, its events sent to the demo's receiver on loopback; warnings and
    errors logged, not every job's run."""
    # --port, else FLEETMARK_PORT or the default: the address the events' source names.
    chosen: dict[str, Any] = {} if port is None else {"port": port}
    try:
        settings = HubSettings(
            data_dir=root,
            database_url=None,
            stale_after_seconds=pace.stale_after,
            drift_interval=pace.jobs,
            drift_grace=pace.drift_grace,
            env_diff_interval=pace.jobs,
            harvest_interval=pace.jobs * 3,
            gate_answers_interval=pace.jobs,
            gate_answers_soak=pace.soak,
            metrics_refresh_interval=pace.jobs,
            event_delivery_interval=EVENTS_EVERY,
            webhook_allow_private=True,
            **chosen,
        )
    except ValidationError as exc:
        raise fail(str(exc)) from exc
    configure_logging(settings.effective_log_format, logging.WARNING)
    return settings


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} seconds" if seconds < 120 else f"about {seconds / 60:.0f} minutes"


def _now() -> datetime:
    return datetime.now(UTC)


def _repositories(root: Path, served_at: str | None = None) -> DemoRepositories:
    try:
        return DemoRepositories.create(root, served_at)
    except GitCommandError as exc:
        raise fail(str(exc)) from exc


def _own_hub(
    root: Path, port: int | None, pace: Pace, clusters_per_type: int, stopping: threading.Event
) -> None:
    """The story told to a hub of the demo's own, on the embedded PostgreSQL in `root`; in
    development mode it reads the repositories from the file system."""
    settings = _settings(root, pace, port)
    port = settings.port
    check_port(settings.host, port)
    console.print(
        f"fleetmark demo in {root}: clusters turn stale after {pace.stale_after} s of silence "
        f"and the example gate soaks {pace.soak} s, so that the story shows within "
        f"{_duration(pace.telling())}",
        highlight=False,
        soft_wrap=True,
    )
    url = open_database(settings, upgrade=True)
    repos = _repositories(root / "repositories")
    admin = asyncio.run(_first_admin_token(url, settings))
    events = _Events()
    with _serving(url, settings, port) as hub_url, EventReceiver(events.take) as receiver:
        hub = Remote(hub_url, admin)
        events.subscribe(hub, receiver.url)
        _tell(hub, repos, pace, clusters_per_type, stopping)


async def _first_admin_token(url: str, settings: HubSettings) -> str:
    """The admin token the demo tells the story with, made in its own store."""
    engine = create_engine(url, settings)
    try:
        async with write_session(create_sessionmaker(engine)) as session:
            created = await token_service.create(
                session,
                TokenRequest(name="demo-admin", scope="admin"),
                token_secret=settings.token_secret.get_secret_value(),
            )
    finally:
        await engine.dispose()
    return created.token


class _Events:
    """The hub's events as the demo's receiver gets them: each printed once, with its type and
    subject, when its signature holds under the subscription's secret."""

    def __init__(self) -> None:
        self.secret = ""
        self.subscribed = threading.Event()
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def subscribe(self, hub: Remote, url: str) -> None:
        created = hub.ask(lambda client: client.create_subscription(SUBSCRIPTION, url))
        self.secret = created.secret
        self.subscribed.set()

    def take(self, body: bytes, signed: str | None) -> bool:
        # The first event may come before the subscription's answer, which holds the secret.
        if signed is None or not self.subscribed.wait(TIMEOUT):
            return False
        try:
            stamp = int(dict(part.split("=", 1) for part in signed.split(","))["t"])
            event = json.loads(body)
            kind, subject, key = str(event["type"]), str(event["subject"]), str(event["id"])
        except (ValueError, KeyError, TypeError):
            return False
        if not hmac.compare_digest(signature(self.secret, stamp, body), signed):
            return False
        with self.lock:
            # Sent at least once: an event that comes again is the same event.
            if key in self.seen:
                return True
            self.seen.add(key)
        _say(f"event {kind} {subject}")
        return True


def _running_hub(
    root: Path,
    hub: Remote,
    pace: Pace,
    clusters_per_type: int,
    stopping: threading.Event,
    listen: tuple[str, int],
    served_at: str | None,
) -> None:
    """The story told to the hub at `hub`, which fetches the repositories from the demo."""
    host, port = listen
    served_at = served_at or f"http://{host}:{port}"
    console.print(
        f"fleetmark demo in {root}, told to the hub at {hub.url}: it fetches the repositories "
        f"from {served_at}; a step every {pace.between_steps:g} s",
        highlight=False,
        soft_wrap=True,
    )
    (root / "repositories").mkdir()
    with GitServer(root / "repositories", host, port, writable={PUSHED}):
        repos = _repositories(root / "repositories", served_at)
        _tell(hub, repos, pace, clusters_per_type, stopping)


class _Story:
    """What the story asks of the hub, through its API with the admin token: scheduling and
    harvests (runs it polls until done), a repository, a read token, a decommissioning."""

    def __init__(self, hub: Remote, repos: DemoRepositories) -> None:
        self.hub = hub
        self.repos = repos

    def prepare(self) -> str:
        """Schedule both environments, add the platform repository and harvest; a read token."""
        platform = self.repos.urls.platform_gitops
        known = self.hub.ask(lambda client: client.repositories())
        if any(found.url == normalise_repository_url(platform) for found in known):
            raise fail(
                f"the hub at {self.hub.url} has heard this story already ({platform} is one of "
                "its repositories): tell it to a hub with an empty store"
            )
        self.schedule(list(ENVIRONMENTS))
        self.hub.ask(
            lambda client: client.add_repository(
                platform, role="platform", branches=list(ENVIRONMENTS)
            )
        )
        self.harvest()
        return self.hub.ask(lambda client: client.create_token("demo-read", scope="read")).token

    def schedule(self, environments: list[str]) -> None:
        urls = self.repos.urls
        run = self._run(
            lambda client: client.start_schedule(
                control_plane=urls.control_plane,
                gitops=urls.platform_gitops,
                environments=environments,
            )
        )
        if run.outcome == "failed" or run.schedule is None:
            raise fail(f"scheduling {', '.join(environments)}: {run.error}")
        for outcome in run.schedule.environments:
            problems = [problem.message for problem in outcome.errors]
            if outcome.failure is not None or problems:
                raise fail(
                    f"scheduling {outcome.environment}: {outcome.failure or '; '.join(problems)}"
                )

    def harvest(self) -> None:
        """Harvest now; while the hub's own harvest holds the lock, again until it is done."""
        deadline = time.monotonic() + HARVEST_PATIENCE
        while (run := self._run(lambda client: client.start_harvest())).outcome == "failed":
            if time.monotonic() > deadline:
                raise fail(f"harvesting: {run.error}")
            time.sleep(POLL)
        assert run.harvest is not None
        for outcome in run.harvest.repositories:
            if outcome.errors:
                raise fail(f"harvesting {outcome.url}: {outcome.errors} errors")

    def decommission(self, name: str) -> None:
        self.hub.ask(lambda client: client.decommission_cluster(name))

    def _run(self, start: Callable[[HubClient], RequestedRun]) -> RequestedRun:
        return self.hub.ask(lambda client: client.wait_for_run(start(client), interval=POLL))


class Fleet:
    """The simulated fleet reporting from a thread of its own until stopped; the story changes
    it under `lock`."""

    def __init__(
        self, hub_url: str, admin_token: str, simulation: Simulation, every: float
    ) -> None:
        self.client = httpx.Client(base_url=hub_url, timeout=TIMEOUT)
        self.simulation = simulation
        self.tokens = register_fleet(self.client, admin_token, simulation)
        self.every = every
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._report, name="fleetmark-demo-fleet")

    def __enter__(self) -> "Fleet":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.thread.join()
        self.client.close()

    def _report(self) -> None:
        while not self.stopped.is_set():
            with self.lock:
                report_round(HubClient.over(self.client), self.simulation, self.tokens)
            if self.stopped.wait(self.every):
                return
            with self.lock:
                self.simulation.step()


@contextmanager
def _serving(url: str, settings: HubSettings, port: int) -> Iterator[str]:
    """The hub on a thread of its own (its jobs on another, as in `fleetmark serve`); its URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, url),
            host=settings.host,
            port=port,
            http=DeadlineHttpToolsProtocol,
            access_log=False,
            log_level="warning",
        )
    )
    thread = threading.Thread(target=server.run, name="fleetmark-demo-hub")
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise fail(f"the hub did not start on {settings.host}:{port}")
            time.sleep(0.05)
        yield f"http://{settings.host}:{port}"
    finally:
        server.should_exit = True
        thread.join()


def _tell(
    hub: Remote,
    repos: DemoRepositories,
    pace: Pace,
    clusters_per_type: int,
    stopping: threading.Event,
) -> None:
    assert hub.token is not None
    story = _Story(hub, repos)
    read = story.prepare()
    fleet = Fleet(hub.url, hub.token, demo_fleet(repos, clusters_per_type), pace.report_every)
    with fleet:
        _introduce(hub, read, repos, pace, len(fleet.simulation.clusters))
        for number, step in enumerate(STEPS, 1):
            if stopping.wait(pace.between_steps):
                return
            _say(f"step {number} of {len(STEPS)}: {step.title}")
            _act(story, fleet, step)
        if stopping.wait(pace.settling()):
            return
        _say("The story is told; the hub stays up for you to look around. Ctrl-C stops it.")
        while not stopping.wait(1.0):
            pass


def _act(story: _Story, fleet: Fleet, step: Step) -> None:
    with fleet.lock:
        environments = step.act(story.repos, fleet.simulation)
    if environments:
        story.schedule(environments)
    story.harvest()
    with fleet.lock:
        for environment in ENVIRONMENTS:
            fleet.simulation.heads[environment] = story.repos.heads(environment)
    if step.decommission is not None:
        story.decommission(step.decommission)


def _say(text: str) -> None:
    console.print(f"[dim]{_now():%H:%M:%S}[/] {escape(text)}", highlight=False, soft_wrap=True)


def _introduce(hub: Remote, read: str, repos: DemoRepositories, pace: Pace, clusters: int) -> None:
    platform = repos.platform_gitops
    fleetmark = runnable()
    lines = [
        f"The hub is up at {hub.url}, {clusters} simulated clusters report to it every "
        f"{pace.report_every:g} s.",
        f"  open   {hub.url}/            the fleet",
        f"         {hub.url}/docs        the API",
        f"  repositories in {platform.parent}: control-plane, app-src, app-gitops, {platform.name}",
        "  then, in another terminal (FLEETMARK_TOKEN is a read token):",
        f"    export FLEETMARK_HUB_URL={hub.url} FLEETMARK_TOKEN={read}",
        f"    {fleetmark} status",
        f"    {fleetmark} drift",
        f"    {fleetmark} diff dev stage",
    ]
    if repos.served_at is None:
        lines += [
            "  once the story is told, stage's gate passes and dev's stays pending "
            "(a suspended and a silent cluster):",
            f"    {fleetmark} gate wait --environment stage --soak {pace.soak}s --timeout 5m "
            f"--commit $(git -C {shlex.quote(str(platform))} rev-parse stage)",
            f"    {fleetmark} gate wait --environment dev --soak {pace.soak}s --timeout 2m "
            f"--commit $(git -C {shlex.quote(str(platform))} rev-parse dev)",
            f"  admin token, for the API's admin endpoints: {hub.token}",
        ]
    lines.append(f"The story, a step every {pace.between_steps:g} s:")
    for line in lines:
        console.print(escape(line), highlight=False, soft_wrap=True)


def runnable() -> str:
    """This fleetmark as a shell runs it from here: `fleetmark` when that is the one on PATH,
    else its path, relative when it lies below the working directory (`.venv/bin/fleetmark`)."""
    executable = Path(sys.executable).parent / "fleetmark"
    on_path = shutil.which("fleetmark")
    if on_path is not None and Path(on_path).resolve() == executable.resolve():
        return "fleetmark"
    try:
        relative = executable.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(executable))
    # A name without a slash would be looked up on PATH.
    return shlex.quote(str(relative) if relative.parent != Path() else f"./{relative}")


def register(app: typer.Typer) -> None:
    app.command()(demo)

"""`fleetmark demo`: the reference scenario on the embedded PostgreSQL, told in a few minutes.

It writes the scenario's repositories (hub/demo/story.py) under the data directory, schedules
the control plane into the platform GitOps repository, harvests, serves a hub and runs the
simulated fleet (hub/simulation.py) against it through the report API over HTTP, as
`fleetmark simulate` does. Then it tells the story step by step, scheduling and harvesting
after each commit, and keeps the hub up until Ctrl-C or SIGTERM, which stop everything it
started: the fleet, the hub and its jobs, the embedded PostgreSQL (when the process exits).
"""

import asyncio
import logging
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Annotated

import httpx
import typer
import uvicorn
from pydantic import ValidationError
from rich.markup import escape
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.app import create_app
from hub.cli.common import DataDirOption, PortOption, check_port, load_settings, open_database
from hub.cli.output import console, errors, fail
from hub.cli.remote import bearer, error_of
from hub.cli.simulate import register_fleet, report_round
from hub.database import create_engine, create_sessionmaker, write_session
from hub.demo.repos import GitCommandError
from hub.demo.story import ENVIRONMENTS, STEPS, DemoRepositories, Step, demo_fleet
from hub.errors import FleetmarkError, HarvestRunning
from hub.harvest import service as harvest_service
from hub.harvest.schemas import RepositoryConfig
from hub.http import DeadlineHttpToolsProtocol
from hub.logs import configure_logging
from hub.scheduling import service as scheduling_service
from hub.scheduling.schemas import ScheduleRequest
from hub.settings import HubSettings
from hub.simulation import Simulation
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest

# A file the demo leaves in its data directory: only such a directory is emptied by a new run.
MARKER = "fleetmark-demo"
TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Pace:
    """How fast the story goes."""

    report_every: float  # seconds between two reports of a cluster
    between_steps: float  # seconds from one step of the story to the next
    stale_after: int  # seconds of silence after which a cluster is stale
    jobs: float  # seconds between the hub's drift, environment diff and harvest runs
    soak: int  # seconds a gate wants every cluster Ready on a commit

    def settling(self) -> float:
        """Seconds after the last step until its effects show: the silent cluster stale, and
        the drift and environment diff jobs having seen it all."""
        return self.stale_after + 2 * self.jobs

    def telling(self) -> float:
        return len(STEPS) * self.between_steps + self.settling()


NORMAL = Pace(report_every=3.0, between_steps=30.0, stale_after=45, jobs=5.0, soak=60)
FAST = Pace(report_every=0.3, between_steps=2.5, stale_after=3, jobs=1.0, soak=5)


def demo(
    port: PortOption = None,
    data_dir: DataDirOption = None,
    fast: Annotated[
        bool, typer.Option("--fast", help="Tell the story in seconds rather than minutes.")
    ] = False,
    clusters_per_type: Annotated[
        int, typer.Option(min=2, max=10, help="Clusters of each cluster type per environment.")
    ] = 2,
) -> None:
    """Show fleetmark at work: the reference scenario's repositories, a hub, a simulated fleet.

    Everything lives in the data directory (default: a `demo` folder in fleetmark's user data
    directory), which each run starts afresh. Ctrl-C stops it all.
    """
    pace = FAST if fast else NORMAL
    root = _fresh_directory(data_dir or load_settings().data_dir / "demo")
    settings = _settings(root, pace)
    port = port or settings.port
    check_port(settings.host, port)
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    console.print(
        f"fleetmark demo in {root}: clusters turn stale after {pace.stale_after} s of silence "
        f"and the example gate soaks {pace.soak} s, so that the story shows within "
        f"{_duration(pace.telling())}",
        highlight=False,
        soft_wrap=True,
    )
    url = open_database(settings, upgrade=True)
    try:
        repos = DemoRepositories.create(root / "repositories")
    except GitCommandError as exc:
        raise fail(str(exc)) from exc
    try:
        asyncio.run(_demo(_Store(url, settings, repos), port, pace, clusters_per_type, stopping))
    except FleetmarkError as exc:
        raise fail(exc.detail) from exc
    console.print("demo stopped: the fleet, the hub and its database", highlight=False)


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


def _settings(root: Path, pace: Pace) -> HubSettings:
    """The embedded PostgreSQL in `root`, whatever FLEETMARK_DATABASE_URL says, and the hub's
    jobs at the story's pace; warnings and errors logged, not every job's run."""
    try:
        settings = HubSettings(
            data_dir=root,
            database_url=None,
            stale_after_seconds=pace.stale_after,
            drift_interval=pace.jobs,
            env_diff_interval=pace.jobs,
            harvest_interval=pace.jobs * 3,
            gate_answers_soak=pace.soak,
            metrics_refresh_interval=pace.jobs,
        )
    except ValidationError as exc:
        raise fail(str(exc)) from exc
    configure_logging(settings.effective_log_format, logging.WARNING)
    return settings


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} seconds" if seconds < 120 else f"about {seconds / 60:.0f} minutes"


def _now() -> datetime:
    return datetime.now(UTC)


class _Store:
    """The demo's way into the store, beside the hub's: it schedules and harvests right after
    each commit rather than at the hub's next interval."""

    def __init__(self, url: str, settings: HubSettings, repos: DemoRepositories) -> None:
        self.url = url
        self.settings = settings
        self.repos = repos

    async def __aenter__(self) -> "_Store":
        self.engine = create_engine(self.url, self.settings)
        self.sessions: async_sessionmaker[AsyncSession] = create_sessionmaker(self.engine)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.engine.dispose()

    async def prepare(self) -> tuple[str, str]:
        """Schedule both environments, add the platform repository and harvest; the admin and
        read tokens of the demo."""
        await self.schedule(list(ENVIRONMENTS))
        secret = self.settings.token_secret.get_secret_value()
        async with write_session(self.sessions) as session:
            config = RepositoryConfig(
                url=self.repos.urls.platform_gitops, role="platform", branches=list(ENVIRONMENTS)
            )
            await harvest_service.add_repository(
                session, config, credentials_dir=None, allow_local=True, now=_now()
            )
            admin = await token_service.create(
                session, TokenRequest(name="demo-admin", scope="admin"), token_secret=secret
            )
            read = await token_service.create(
                session, TokenRequest(name="demo-read", scope="read"), token_secret=secret
            )
        await self.harvest()
        return admin.token, read.token

    async def schedule(self, environments: list[str]) -> None:
        request = ScheduleRequest(
            control_plane=str(self.repos.control_plane.path),
            gitops=str(self.repos.platform_gitops),
            environments=environments,
        )
        run = await scheduling_service.schedule(self.sessions, self.settings, request, clock=_now)
        for outcome in run.environments:
            problems = [problem.message for problem in outcome.errors]
            if outcome.failure is not None or problems:
                raise fail(
                    f"scheduling {outcome.environment}: {outcome.failure or '; '.join(problems)}"
                )

    async def harvest(self) -> None:
        """Harvest now; when the hub's own harvest is at it, after that."""
        while True:
            try:
                report = await harvest_service.harvest(self.sessions, self.settings, clock=_now)
            except HarvestRunning:
                await asyncio.sleep(0.1)
            else:
                break
        for outcome in report.repositories:
            if outcome.errors:
                raise fail(f"harvesting {outcome.url}: {outcome.errors} errors")


class _Fleet:
    """The simulated fleet reporting from a thread of its own until stopped; the story changes
    it under `lock`."""

    def __init__(self, hub_url: str, admin_token: str, simulation: Simulation, pace: Pace) -> None:
        self.client = httpx.Client(base_url=hub_url, timeout=TIMEOUT)
        self.simulation = simulation
        self.tokens = register_fleet(self.client, admin_token, simulation)
        self.every = pace.report_every
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._report, name="fleetmark-demo-fleet")

    def __enter__(self) -> "_Fleet":
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopped.set()
        self.thread.join()
        self.client.close()

    def _report(self) -> None:
        while not self.stopped.is_set():
            with self.lock:
                report_round(self.client, self.simulation, self.tokens)
            if self.stopped.wait(self.every):
                return
            with self.lock:
                self.simulation.step()


@contextmanager
def _serving(store: _Store, port: int) -> Iterator[str]:
    """The hub on a thread of its own (its jobs on another, as in `fleetmark serve`); its URL."""
    settings = store.settings
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, store.url),
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


async def _demo(
    store: _Store, port: int, pace: Pace, clusters_per_type: int, stopping: threading.Event
) -> None:
    async with store:
        admin, read = await store.prepare()
        with _serving(store, port) as hub_url:
            fleet = _Fleet(hub_url, admin, demo_fleet(store.repos, clusters_per_type), pace)
            with fleet:
                _introduce(
                    hub_url, (admin, read), store.repos, pace, len(fleet.simulation.clusters)
                )
                for number, step in enumerate(STEPS, 1):
                    if await _pause(pace.between_steps, stopping):
                        return
                    _say(f"step {number} of {len(STEPS)}: {step.title}")
                    await _act(store, fleet, step, hub_url, admin)
                if await _pause(pace.settling(), stopping):
                    return
                _say("The story is told; the hub stays up for you to look around. Ctrl-C stops it.")
                await _pause(None, stopping)


async def _act(store: _Store, fleet: _Fleet, step: Step, hub_url: str, admin: str) -> None:
    with fleet.lock:
        environments = step.act(store.repos, fleet.simulation)
    if environments:
        await store.schedule(environments)
    await store.harvest()
    with fleet.lock:
        for environment in ENVIRONMENTS:
            fleet.simulation.heads[environment] = store.repos.heads(environment)
    if step.decommission is not None:
        _decommission(hub_url, admin, step.decommission)


def _decommission(hub_url: str, admin: str, name: str) -> None:
    try:
        response = httpx.post(
            f"{hub_url}/api/v1/clusters/{name}/decommission",
            headers=bearer(admin),
            timeout=TIMEOUT,
        )
    except httpx.HTTPError as exc:
        errors.print(f"decommissioning {name}: the hub did not answer ({exc})", highlight=False)
        return
    if not response.is_success:
        _, detail = error_of(response)
        errors.print(
            f"decommissioning {name}: {detail} (HTTP {response.status_code})", highlight=False
        )


async def _pause(seconds: float | None, stopping: threading.Event) -> bool:
    """Wait `seconds` (None: until stopped); whether the demo is being stopped."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not stopping.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def _say(text: str) -> None:
    console.print(f"[dim]{_now():%H:%M:%S}[/] {escape(text)}", highlight=False, soft_wrap=True)


def _introduce(
    hub_url: str, tokens: tuple[str, str], repos: DemoRepositories, pace: Pace, clusters: int
) -> None:
    admin, read = tokens
    platform = repos.platform_gitops
    fleetmark = runnable()
    lines = [
        f"The hub is up at {hub_url}, {clusters} simulated clusters report to it every "
        f"{pace.report_every:g} s.",
        f"  open   {hub_url}/            the fleet",
        f"         {hub_url}/docs        the API",
        f"  repositories in {platform.parent}: control-plane, app-src, app-gitops, {platform.name}",
        "  then, in another terminal (FLEETMARK_TOKEN is a read token):",
        f"    export FLEETMARK_HUB_URL={hub_url} FLEETMARK_TOKEN={read}",
        f"    {fleetmark} status",
        f"    {fleetmark} drift",
        f"    {fleetmark} diff dev stage",
        "  once the story is told, stage's gate passes and dev's stays pending "
        "(a suspended and a silent cluster):",
        f"    {fleetmark} gate wait --environment stage --soak {pace.soak}s --timeout 5m "
        f"--commit $(git -C {shlex.quote(str(platform))} rev-parse stage)",
        f"    {fleetmark} gate wait --environment dev --soak {pace.soak}s --timeout 2m "
        f"--commit $(git -C {shlex.quote(str(platform))} rev-parse dev)",
        f"  admin token, for the API's admin endpoints: {admin}",
        f"The story, a step every {pace.between_steps:g} s:",
    ]
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

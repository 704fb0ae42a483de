"""Harvest benchmark: backfill a generated platform repo, then harvest one new commit.

The repositories, the figures and git's own baselines are in docs/benchmarks.md ("Harvest").
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from hub import migrate
from hub.database import create_sessionmaker, normalise_database_url, write_session
from hub.harvest import repository, tasks
from hub.settings import HubSettings

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/fleetmark_bench_harvest"
PROTECTED_DATABASES = {"postgres", "template0", "template1"}
CLUSTER_TYPES = 10
TARGETS = 20  # per cluster type: 200 assignments
APP_COMMITS = 500
MERGE_EVERY = 100
EPOCH = 1_795_000_000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--commits", type=int, default=10_000, help="Platform repo commits.")
    parser.add_argument(
        "--database-url",
        default=DEFAULT_DATABASE_URL,
        help="A PostgreSQL database to (re)create for the run; dropped and created anew.",
    )
    return parser.parse_args()


class FastImport:
    """Writes a `git fast-import` stream: commits with inline files, deterministic times."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.marks = 0

    def commit(
        self,
        branch: str,
        message: str,
        files: dict[str, str],
        parents: tuple[int, ...] = (),
    ) -> int:
        self.marks += 1
        stamp = f"{EPOCH + 60 * self.marks} +0000"
        head = [
            f"commit refs/heads/{branch}",
            f"mark :{self.marks}",
            f"author Platform Bot <bot@contoso.example> {stamp}",
            f"committer Platform Bot <bot@contoso.example> {stamp}",
            f"data {len(message.encode())}",
            message,
        ]
        if parents:
            head.append(f"from :{parents[0]}")
            head.extend(f"merge :{parent}" for parent in parents[1:])
        self.parts.append(("\n".join(head) + "\n").encode())
        for path, content in files.items():
            data = content.encode()
            self.parts.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        self.parts.append(b"\n")
        return self.marks

    def write(self, path: Path, branch: str) -> None:
        subprocess.run(
            ["git", "init", "--quiet", "--bare", f"--initial-branch={branch}", str(path)],
            check=True,
        )
        subprocess.run(
            ["git", "fast-import", "--quiet"], cwd=path, input=b"".join(self.parts), check=True
        )


def config(cluster_type: int, target: int, value: int) -> str:
    return (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: platform-config\n"
        f"  namespace: dev-ct{cluster_type}-target{target}\n"
        f'data:\n  REGION: "region-{cluster_type % 3}"\n  REVISION: "{value}"\n'
    )


def reconciler(cluster_type: int, target: int, app_url: str) -> str:
    name = f"target{target}"
    if (cluster_type + target) % 2:
        return (
            "apiVersion: argoproj.io/v1alpha1\nkind: Application\n"
            f"metadata:\n  name: {name}\n  namespace: argocd\nspec:\n  source:\n"
            f"    repoURL: {app_url}\n    targetRevision: dev\n    path: {name}\n"
        )
    return (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\n"
        f"metadata:\n  name: {name}\n  namespace: flux-system\n"
        f"spec:\n  url: {app_url}\n  ref:\n    branch: dev\n---\n"
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
        f"metadata:\n  name: {name}\n  namespace: flux-system\n"
        f"spec:\n  sourceRef:\n    kind: GitRepository\n    name: {name}\n  path: ./{name}\n"
    )


def generate_platform(path: Path, commits: int, app_url: str) -> None:
    stream = FastImport()
    files: dict[str, str] = {".github/tracking/Promoted_Commit_Id": f"{0:040x}\n"}
    for cluster_type in range(CLUSTER_TYPES):
        for target in range(TARGETS):
            folder = f"ct{cluster_type}/target{target}"
            files[f"{folder}/namespace.yaml"] = (
                "apiVersion: v1\nkind: Namespace\nmetadata:\n"
                f"  name: dev-ct{cluster_type}-target{target}\n"
            )
            files[f"{folder}/platform-config.yaml"] = config(cluster_type, target, 0)
            files[f"{folder}/reconciler.yaml"] = reconciler(cluster_type, target, app_url)
    head = stream.commit("dev", "Initial assignments", files)
    made = 1
    while made < commits:
        assignment = made % (CLUSTER_TYPES * TARGETS)
        cluster_type, target = divmod(assignment, TARGETS)
        change = {
            f"ct{cluster_type}/target{target}/platform-config.yaml": config(
                cluster_type, target, made
            ),
            ".github/tracking/Promoted_Commit_Id": f"{made:040x}\n",
        }
        if made % MERGE_EVERY == 0 and made + 1 < commits:
            side = stream.commit("deployment", f"Deployment {made}", change, (head,))
            head = stream.commit("dev", f"Merge deployment {made}", {}, (head, side))
            made += 2
        else:
            head = stream.commit("dev", f"Promote {made}", change, (head,))
            made += 1
    stream.write(path, "dev")


def deployment(target: int, version: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n"
        "spec:\n  template:\n    spec:\n      containers:\n"
        f"      - name: app\n        image: ghcr.io/contoso/target{target}:{version}\n"
    )


def generate_app(path: Path) -> None:
    stream = FastImport()
    files = {
        f"target{target}/deployment.yaml": deployment(target, "1.0.0") for target in range(TARGETS)
    }
    head = stream.commit("dev", "Initial manifests", files)
    for index in range(1, APP_COMMITS):
        target = index % TARGETS
        version = f"1.{index // TARGETS}.{target}"
        head = stream.commit(
            "dev",
            f"target{target} {version}",
            {f"target{target}/deployment.yaml": deployment(target, version)},
            (head,),
        )
    stream.write(path, "dev")


def recreate_database(url: str) -> str:
    parsed = make_url(url)
    name = parsed.database
    if not name or name in PROTECTED_DATABASES:
        raise SystemExit(f"refusing to recreate database {name!r}; give one of its own")
    admin = (
        parsed.set(database="postgres")
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return normalise_database_url(url)


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def git(*args: str | Path) -> None:
    subprocess.run(["git", *map(str, args)], check=True, capture_output=True)


def size_of(path: Path) -> int:
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def mib(size: float) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.1f}x baseline" if baseline else "-"


async def run(args: argparse.Namespace, work: Path) -> None:
    app, platform = work / "app-gitops.git", work / "platform-gitops.git"
    started = time.perf_counter()
    generate_app(app)
    generate_platform(platform, args.commits, app.as_uri())
    print(f"generated the repositories in {time.perf_counter() - started:.1f} s")

    baseline_dir = work / "baseline"
    baseline_backfill = 0.0
    for source in (platform, app):
        clone = baseline_dir / source.name
        baseline_backfill += timed(
            lambda source=source, clone=clone: git(
                "clone", "--quiet", "--bare", "--no-tags", source.as_uri(), clone
            )
        )
        baseline_backfill += timed(
            lambda clone=clone: git(
                "-C", clone, "log", "--raw", "--no-renames", "-r", "--format=%H %P %T %an %cI %s"
            )
        )
    baseline_size = sum(size_of(baseline_dir / source.name) for source in (platform, app))

    database_url = recreate_database(args.database_url)
    migrate.upgrade(database_url)
    file = work / "repositories.yaml"
    file.write_text(
        f"repositories:\n- url: {platform.as_uri()}\n  role: platform\n  branches: [dev]\n"
    )
    settings = HubSettings(data_dir=work / "data", repositories_file=file)
    engine = create_async_engine(database_url)
    sessions = create_sessionmaker(engine)

    def clock() -> datetime:
        return datetime.now(UTC)

    try:
        started = time.perf_counter()
        report = await tasks.harvest(sessions, settings, clock=clock)
        backfill = time.perf_counter() - started
        commits = sum(
            branch.new_commits for outcome in report.repositories for branch in outcome.branches
        )
        errors = sum(outcome.errors for outcome in report.repositories)
        async with write_session(sessions) as session:
            store = await repository.store_size(session)

        adder = work / "adder"
        git("clone", "--quiet", platform.as_uri(), adder)
        config_path = adder / "ct3" / "target7" / "platform-config.yaml"
        config_path.write_text(config(3, 7, 10**6))
        git(
            "-C",
            adder,
            "-c",
            "user.name=Bot",
            "-c",
            "user.email=bot@contoso.example",
            "commit",
            "--quiet",
            "-am",
            "One more",
        )
        git("-C", adder, "push", "--quiet", "origin", "dev")
        started = time.perf_counter()
        incremental_report = await tasks.harvest(sessions, settings, clock=clock)
        incremental = time.perf_counter() - started
        new = sum(
            branch.new_commits
            for outcome in incremental_report.repositories
            for branch in outcome.branches
        )
        baseline_incremental = 0.0
        for source in (platform, app):
            clone = baseline_dir / source.name
            baseline_incremental += timed(
                lambda source=source, clone=clone: git(
                    "-C",
                    clone,
                    "fetch",
                    "--quiet",
                    "--prune",
                    "--no-tags",
                    source.as_uri(),
                    "+refs/heads/*:refs/heads/*",
                )
            )
            baseline_incremental += timed(
                lambda clone=clone: git("-C", clone, "log", "-1", "--raw", "--format=%H %P %T")
            )
    finally:
        await engine.dispose()

    print(
        f"repositories: platform {args.commits} commits, {CLUSTER_TYPES * TARGETS} assignments; "
        f"app {APP_COMMITS} commits, {TARGETS} folders"
    )
    print(f"harvested: {commits} commits, {errors} harvest errors")
    print(
        f"backfill:       {backfill:8.3f} s (target < 60 s)    "
        f"baseline git clone + log --raw: {baseline_backfill:.3f} s, "
        f"{ratio(backfill, baseline_backfill)}"
    )
    print(
        f"one new commit: {incremental:8.3f} s (target < 0.5 s)   "
        f"baseline git fetch + log -1:    {baseline_incremental:.3f} s, "
        f"{ratio(incremental, baseline_incremental)} [{new} new commit]"
    )
    print(
        f"store size:     {mib(store):>10}                   "
        f"baseline bare git clones:       {mib(baseline_size)}, {ratio(store, baseline_size)}"
    )


def main() -> None:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="fleetmark-harvest-bench-"))
    try:
        asyncio.run(run(args, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""What goes wrong stays where it happened: a broken template, or one over its budget or time
limit, fails its assignments only (they keep their output), a control-plane document that does
not load deletes nothing, and the API serves the errors. Failures and recoveries are
announced, a control plane that cannot be read too."""

from pathlib import Path

import httpx
import yaml
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from hub.scheduling import tasks
from hub.scheduling.schemas import EnvironmentOutcome, Problem, ScheduleRequest
from hub.settings import HubSettings
from tests.conftest import hub_settings
from tests.hub.outbox import published
from tests.hub.scheduling.conftest import Schedule
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.scheduler_core import scenario
from tests.support import FakeClock, bearer

FUNCTIONAL = "hello-world-app-functional-test"
PERFORMANCE = "hello-world-app-performance-test"
BROKEN_ARGOCD = scenario.ARGOCD_TEMPLATE.replace(
    'repoURL: "{{ .Manifests.repo }}"', 'repoURL: "{{ .Manifests.repo "'
)
DEV_CONFIG = "configs/dev-config.yaml"
# The sort loop, which ran for over a minute, in the name of large's reconciler.
SPENDTHRIFT_ARGOCD = scenario.ARGOCD_TEMPLATE.replace(
    'name: "{{ .DeploymentTargetName }}"',
    'name: "{{ .DeploymentTargetName }}'
    '{{$l := until 100000}}{{range until 2000}}{{$_ := sortAlpha $l}}{{end}}"',
)
# Fifty thousand steps: within the budget, long enough for the render to read its clock.
SLOW_ARGOCD = scenario.ARGOCD_TEMPLATE.replace(
    'name: "{{ .DeploymentTargetName }}"',
    'name: "{{ .DeploymentTargetName }}{{ range 50000 }}{{ end }}"',
)


def dev_config(environment: str) -> str:
    return scenario.config_map(
        "dev-config",
        {},
        {"ENVIRONMENT": environment, "SOME_COMMON_ENVIRONMENT_VARIABLE": '"false"'},
    )


def data(platform: Platform, path: str) -> dict[str, str]:
    document: dict[str, dict[str, str]] = yaml.safe_load(platform.files("dev")[path])
    return document["data"]


async def fail_large_with(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform, argocd: str
) -> tuple[EnvironmentOutcome, EnvironmentOutcome, Problem]:
    """Schedule dev, then again with a change reaching both dev assignments and a promoted
    main whose argocd template (large's reconciler) is `argocd`; check that large failed alone,
    kept its output, and that drone's change was written. The first run, the second and its
    one error."""
    first = await schedule("dev")
    before = platform.files("dev")
    control_plane.commit("dev", {DEV_CONFIG: dev_config("Development")})
    control_plane.promote("dev", control_plane.commit("main", {"templates/argocd.yaml": argocd}))

    outcome = await schedule("dev")

    assert outcome.commit is not None
    assert outcome.failed == 1
    [error] = outcome.errors
    assert (error.kind, error.template, error.cluster_type, error.deployment_target) == (
        "template",
        "argocd",
        "large",
        PERFORMANCE,
    )
    assert data(platform, f"drone/{FUNCTIONAL}/platform-config.yaml")["ENVIRONMENT"] == (
        "Development"
    )
    after = platform.files("dev")
    for name in ("namespace.yaml", "platform-config.yaml", "reconciler.yaml"):
        path = f"large/{PERFORMANCE}/{name}"
        assert after[path] == before[path], path
    assert platform.changed(first.commit or "", outcome.commit) == [
        ".github/tracking/Promoted_Commit_Id",
        f"drone/{FUNCTIONAL}/platform-config.yaml",
        "large/README.md",
    ]
    return first, outcome, error


async def test_broken_template_keeps_its_assignments_output_and_the_others_are_written(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    first, outcome, error = await fail_large_with(schedule, control_plane, platform, BROKEN_ARGOCD)

    assert "templates/argocd.yaml" in error.message
    assert "render failed; previous output kept" in platform.files("dev")["large/README.md"]

    errors = await client.get("/api/v1/scheduling/errors", headers=bearer(read_token))
    assignments = await client.get("/api/v1/assignments", headers=bearer(read_token))

    assert errors.status_code == 200, errors.text
    [served] = errors.json()["items"]
    assert served["environment"] == "dev"
    assert served["kind"] == "template"
    assert served["template"] == "argocd"
    assert (served["cluster_type"], served["deployment_target"]) == ("large", PERFORMANCE)
    assert served["message"] == error.message
    status = {
        (item["cluster_type"], item["status"], item["commit_sha"])
        for item in assignments.json()["items"]
    }
    assert status == {("drone", "rendered", outcome.commit), ("large", "failed", first.commit)}


async def test_a_template_over_its_budget_fails_its_assignment_and_the_others_are_written(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    _, _, error = await fail_large_with(schedule, control_plane, platform, SPENDTHRIFT_ARGOCD)

    assert error.message.startswith(
        f"dev, cluster type large, deployment target {PERFORMANCE}: reconciler.yaml: "
        "Template argocd (templates/argocd.yaml) manifests[0] fails: template: argocd/manifests[0]:"
    )
    assert "error calling sortAlpha: exceeded the budget of 1000000 cost units" in error.message
    errors = await client.get("/api/v1/scheduling/errors", headers=bearer(read_token))
    [served] = errors.json()["items"]
    assert served["message"] == error.message


class Timer:
    """A monotonic clock moving on by half a second every time it is read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += 0.5
        return self.now


async def test_an_assignment_rendering_past_the_time_limit_setting_fails_alone(
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    control_plane: ControlPlane,
    platform: Platform,
    tmp_path: Path,
) -> None:
    settings = hub_settings(data_dir=tmp_path / "data", template_render_timeout=1.5)
    control_plane.promote(
        "dev", control_plane.commit("main", {"templates/argocd.yaml": SLOW_ARGOCD})
    )
    request = ScheduleRequest(
        control_plane=str(control_plane.path), gitops=str(platform.path), environments=["dev"]
    )
    timer = Timer()

    run = await tasks.run_schedule(sessions, settings, request, clock=clock, timer=timer)

    [outcome] = run.environments
    [error] = outcome.errors
    assert (error.kind, error.template, error.cluster_type, error.deployment_target) == (
        "template",
        "argocd",
        "large",
        PERFORMANCE,
    )
    assert error.message.endswith("exceeded the time limit of 1.5 seconds")
    assert outcome.failed == 1
    written = platform.files("dev")
    assert f"drone/{FUNCTIONAL}/reconciler.yaml" in written
    assert not any(path.startswith(f"large/{PERFORMANCE}/") for path in written)
    # Read when each assignment's render began, and by the slow one every thousand units.
    assert 2 < timer.readings < 20


async def test_a_fixed_template_clears_its_error_and_renders_again(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    await schedule("dev")
    control_plane.commit("dev", {DEV_CONFIG: dev_config("Development")})
    control_plane.promote(
        "dev", control_plane.commit("main", {"templates/argocd.yaml": BROKEN_ARGOCD})
    )
    await schedule("dev")
    control_plane.promote(
        "dev", control_plane.commit("main", {"templates/argocd.yaml": scenario.ARGOCD_TEMPLATE})
    )

    fixed = await schedule("dev")

    assert fixed.errors == []
    assert [(c.cluster_type, c.change, c.status) for c in fixed.changes] == [
        ("large", "updated", "rendered")
    ]
    assert data(platform, f"large/{PERFORMANCE}/platform-config.yaml")["ENVIRONMENT"] == (
        "Development"
    )
    errors = await client.get("/api/v1/scheduling/errors", headers=bearer(read_token))
    assert errors.json()["items"] == []


async def test_an_error_met_again_keeps_when_it_was_first_seen(
    schedule: Schedule,
    control_plane: ControlPlane,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    control_plane.promote(
        "dev", control_plane.commit("main", {"templates/argocd.yaml": BROKEN_ARGOCD})
    )
    await schedule("dev")
    control_plane.commit("dev", {DEV_CONFIG: dev_config("Development")})
    await schedule("dev")

    response = await client.get("/api/v1/scheduling/errors", headers=bearer(read_token))

    [served] = response.json()["items"]
    assert served["first_seen_at"] < served["last_seen_at"]


async def test_a_document_that_does_not_load_deletes_nothing(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    first = await schedule("dev")
    large = "cluster-types/west-us/large/large-cluster-type.yaml"
    broken = scenario.DEV[large].replace("  reconciler: argocd\n", "  reconciler: [argocd\n")
    control_plane.commit("dev", {large: broken})

    held = await schedule("dev")

    # Without large's ClusterType the render would delete large's folder; it is kept.
    assert held.commit is None
    assert platform.commits("dev") == [first.commit]
    assert held.held == [
        "large/README.md",
        *(
            f"large/{PERFORMANCE}/{name}"
            for name in (
                "namespace.yaml",
                "platform-config.yaml",
                "reconciler.yaml",
            )
        ),
    ]
    [error] = held.errors
    assert error.kind == "load"
    assert error.file == large
    assert error.line is not None
    response = await client.get(
        "/api/v1/scheduling/errors", params={"kind": "load"}, headers=bearer(read_token)
    )
    assert [item["file"] for item in response.json()["items"]] == [large]

    # Deleting the document for good is a change the scheduler then makes in full.
    control_plane.commit("dev", {large: None})
    removed = await schedule("dev")

    assert removed.errors == []
    assert removed.render == "full"
    assert not any(path.startswith("large/") for path in platform.files("dev"))


async def test_an_environment_the_control_plane_does_not_declare_fails_clearly(
    schedule: Schedule, platform: Platform, client: httpx.AsyncClient, read_token: str
) -> None:
    outcome = await schedule("prod")

    assert outcome.failure == (
        "environment 'prod' was not loaded from the control plane (loaded: dev, stage)"
    )
    assert outcome.commit is None
    assert platform.branches() == {}
    response = await client.get("/api/v1/assignments", headers=bearer(read_token))
    assert response.json()["total"] == 0


async def test_an_unreachable_platform_repository_is_a_git_error(
    schedule: Schedule,
    platform: Platform,
    client: httpx.AsyncClient,
    read_token: str,
    tmp_path: Path,
) -> None:
    platform.path.rename(tmp_path / "moved.git")

    outcome = await schedule("dev")

    assert outcome.failure is not None
    assert outcome.failure.startswith("the platform GitOps repository cannot be read: fetching")
    response = await client.get("/api/v1/scheduling/errors", headers=bearer(read_token))
    [served] = response.json()["items"]
    assert served["kind"] == "git"
    assert served["message"] == outcome.failure


async def test_workload_repositories_are_held_to_the_discovery_allow_list(
    sessions: async_sessionmaker[AsyncSession],
    control_plane: ControlPlane,
    platform: Platform,
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    """The control plane names the workloads' repositories: content, as for the harvester."""
    settings = hub_settings(data_dir=tmp_path / "data", discovery_allowed_urls=["github.com"])
    request = ScheduleRequest(
        control_plane=str(control_plane.path), gitops=str(platform.path), environments=["dev"]
    )

    run = await tasks.run_schedule(sessions, settings, request, clock=clock)

    [outcome] = run.environments
    app_src = (tmp_path / "remotes" / "app-src").as_uri()
    assert any(
        error.kind == "load"
        and f"{app_src}, named by {control_plane.path}, is not in FLEETMARK_DISCOVERY_ALLOWED_URLS"
        in error.message
        for error in outcome.errors
    ), outcome.errors


async def test_a_failing_environment_is_announced_once_and_its_recovery_too(
    schedule: Schedule,
    platform: Platform,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    tmp_path: Path,
) -> None:
    await schedule("dev")
    moved = platform.path.rename(tmp_path / "moved.git")
    failing = await schedule("dev")
    clock.advance(minutes=5)
    await schedule("dev")
    moved.rename(platform.path)
    clock.advance(minutes=5)
    await schedule("dev")
    await schedule("dev")

    async with sessions() as session:
        events = await published(session, "fleetmark.schedule.")
    assert [(e["type"], e["subject"], e["environment"]) for e in events] == [
        ("fleetmark.schedule.failed", "environments/dev/schedule", "dev"),
        ("fleetmark.schedule.recovered", "environments/dev/schedule", "dev"),
    ]
    failed, recovered = (e["data"] for e in events)
    assert failed["failure"] == failing.failure
    assert recovered["failure"] is None
    assert recovered["failing_since"] == failed["failing_since"]


async def test_a_template_failing_for_one_cluster_type_is_announced_and_its_fix_too(
    schedule: Schedule,
    control_plane: ControlPlane,
    platform: Platform,
    sessions: async_sessionmaker[AsyncSession],
    clock: FakeClock,
    client: httpx.AsyncClient,
    read_token: str,
) -> None:
    """The failure stays in the timeline once the Template is fixed and its error is gone."""
    started = clock.now
    _, broken, error = await fail_large_with(schedule, control_plane, platform, BROKEN_ARGOCD)
    control_plane.commit("dev", {DEV_CONFIG: dev_config("Dev")})
    still = await schedule("dev")
    control_plane.promote(
        "dev", control_plane.commit("main", {"templates/argocd.yaml": scenario.ARGOCD_TEMPLATE})
    )
    await schedule("dev")
    await schedule("dev")

    async with sessions() as session:
        events = await published(session, "fleetmark.schedule.")
    timeline = await client.get(
        "/api/v1/timeline",
        params={"since": started.isoformat(), "until": clock.advance(minutes=1).isoformat()},
        headers=bearer(read_token),
    )

    assert (broken.failure, still.failed) == (None, 1)
    assert [(e["type"], e["subject"]) for e in events] == [
        ("fleetmark.schedule.failed", "environments/dev/schedule"),
        ("fleetmark.schedule.recovered", "environments/dev/schedule"),
    ]
    failed, recovered = (e["data"] for e in events)
    failure = (
        f"1 assignment of cluster type large fails to render (old output kept): {error.message}"
    )
    assert (failed["failure"], failed["failing_cluster_types"], failed["failed_assignments"]) == (
        failure,
        ["large"],
        1,
    )
    assert (recovered["failure"], recovered["failing_cluster_types"]) == (None, [])
    assert recovered["failing_since"] == failed["failing_since"]
    assert timeline.status_code == 200, timeline.text
    rows = [
        (row["kind"], row["environment"], row["summary"])
        for row in timeline.json()["items"]
        if row["kind"].startswith("schedule.")
    ]
    assert rows == [
        ("schedule.recovered", "dev", "scheduling dev works again"),
        ("schedule.failed", "dev", f"scheduling dev fails: {failure}"),
    ]


async def schedule_all(
    sessions: async_sessionmaker[AsyncSession],
    settings: HubSettings,
    clock: FakeClock,
    control_plane: Path,
    platform: Platform,
) -> list[EnvironmentOutcome]:
    """A run of the periodic job: every environment the control plane declares."""
    clock.advance(minutes=1)
    request = ScheduleRequest(control_plane=str(control_plane), gitops=str(platform.path))
    run = await tasks.run_schedule(sessions, settings, request, clock=clock)
    return run.environments


async def test_a_control_plane_that_cannot_be_read_fails_the_environments_it_scheduled(
    sessions: async_sessionmaker[AsyncSession],
    scheduling_settings: HubSettings,
    clock: FakeClock,
    control_plane: ControlPlane,
    platform: Platform,
    tmp_path: Path,
) -> None:
    await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)
    moved = control_plane.path.rename(tmp_path / "moved.git")
    unread = await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)
    await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)
    moved.rename(control_plane.path)
    await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)

    async with sessions() as session:
        events = await published(session, "fleetmark.schedule.")
    assert [outcome.environment for outcome in unread] == ["dev", "stage"]
    assert all(outcome.failure for outcome in unread)
    assert [(e["type"], e["subject"]) for e in events] == [
        ("fleetmark.schedule.failed", "environments/dev/schedule"),
        ("fleetmark.schedule.failed", "environments/stage/schedule"),
        ("fleetmark.schedule.recovered", "environments/dev/schedule"),
        ("fleetmark.schedule.recovered", "environments/stage/schedule"),
    ]
    assert events[0]["data"]["evidence_url"] == (
        f"{scheduling_settings.effective_public_url}/api/v1/scheduling/errors?environment=dev"
    )


async def test_a_control_plane_never_read_fails_itself_until_it_is_read(
    sessions: async_sessionmaker[AsyncSession],
    scheduling_settings: HubSettings,
    clock: FakeClock,
    control_plane: ControlPlane,
    platform: Platform,
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing"
    for _ in range(2):
        await schedule_all(sessions, scheduling_settings, clock, missing, platform)
    control_plane.path.rename(missing)
    await schedule_all(sessions, scheduling_settings, clock, missing, platform)

    async with sessions() as session:
        events = await published(session, "fleetmark.schedule.")
    about = f"control-planes/{missing.as_uri()}/schedule"
    assert [(e["type"], e["subject"], e["environment"]) for e in events] == [
        ("fleetmark.schedule.failed", about, None),
        ("fleetmark.schedule.recovered", about, None),
    ]
    failed, recovered = (e["data"] for e in events)
    assert failed["environment"] is None
    assert failed["failure"] == "the control plane could not be read; see the load errors"
    assert recovered["failing_since"] == failed["failing_since"]


async def test_a_failing_environment_the_control_plane_does_not_declare_is_closed(
    schedule: Schedule,
    sessions: async_sessionmaker[AsyncSession],
    scheduling_settings: HubSettings,
    clock: FakeClock,
    control_plane: ControlPlane,
    platform: Platform,
) -> None:
    mistyped = await schedule("prdo")
    await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)
    await schedule_all(sessions, scheduling_settings, clock, control_plane.path, platform)

    async with sessions() as session:
        events = await published(session, "fleetmark.schedule.")
    assert [(e["type"], e["subject"], e["data"]["declared"]) for e in events] == [
        ("fleetmark.schedule.failed", "environments/prdo/schedule", True),
        ("fleetmark.schedule.recovered", "environments/prdo/schedule", False),
    ]
    assert events[0]["data"]["failure"] == mistyped.failure

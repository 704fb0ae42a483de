"""HubClient against a hub served on a real port, as a script or a notebook uses it: the fleet
questions answered in the client's models, list answers as DataFrames, the administration
operations with an admin token, refusals as exceptions naming what was wrong, and the Python
API's page run as written.

The hub serves the environment diff's scenario for the module (hello-world 1.1.0 on dev; stage's
drone runs 1.0.0, stage's large failed to apply it); the administration test works on clusters,
tokens and repositories of its own."""

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas
import pytest

from hub.client import HubClient, HubRefused, HubUnreachable, Problem
from hub.client.schemas.diff import Reason as DiffReason
from hub.client.schemas.drift import Reason
from hub.client.schemas.gate import Verdict
from hub.tokens import service as token_service
from hub.tokens.schemas import TokenRequest
from tests.conftest import TOKEN_SECRET, DatabaseServer
from tests.hub.conftest import ServedFleet, serve_diff_scenario
from tests.hub.drifting import evaluate
from tests.hub.harvest.gitrepo import WorkRepo
from tests.hub.scheduling.fleet import reference_fleet
from tests.served import free_port
from tests.support import kustomization, report

ROOT = Path(__file__).resolve().parents[3]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Hub:
    url: str
    read: str
    admin: str
    dev_head: str
    # The hub's clock: reports are judged against it.
    now: datetime


@pytest.fixture(scope="module")
async def hub(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Hub]:
    with database_server.migrated_database() as url:
        live = ServedFleet(url, tmp_path_factory.mktemp("fleet"))
        try:
            await serve_diff_scenario(live)
            async with live.sessions() as session:
                await evaluate(session, live.clock)
                admin = await token_service.create(
                    session, TokenRequest(name="script", scope="admin"), token_secret=TOKEN_SECRET
                )
                await session.commit()
            dev_head = live.platform.head("dev")
            assert dev_head is not None
            yield Hub(live.hub.url, live.token, admin.token, dev_head, live.clock.now)
        finally:
            if live.hub.running:
                live.hub.stop()
            await live.engine.dispose()


def test_the_fleet_questions_come_back_in_the_clients_models(hub: Hub) -> None:
    with HubClient(hub.url, token=hub.read) as client:
        fleet = client.fleet(environment="stage")
        drift = client.drift(environment="stage")
        diff = client.diff(["dev", "stage"])
        history = client.history(cluster="drone-dev")
        detail = client.cluster("large-stage")

    assert fleet.totals.clusters == 2
    assert [environment.name for environment in fleet.environments] == ["stage"]
    assert {cluster.name for cluster in fleet.clusters.items} == {"drone-stage", "large-stage"}
    [failing] = [item for item in drift.items if Reason.FAILING in {r.reason for r in item.reasons}]
    assert failing.cluster == "large-stage"
    assert drift.summary.drifted_clusters >= 1
    [row] = [row for row in diff.rows.items if row.cluster_type == "drone"]
    assert [cell.environment for cell in row.environments] == ["dev", "stage"]
    assert [cell.desired.version for cell in row.environments if cell.desired] == ["1.1.0", "1.0.0"]
    assert DiffReason.AWAITING_PROMOTION in {difference.reason for difference in row.differences}
    assert {item.cluster for item in history.items} == {"drone-dev"}
    assert history.next_offset is None
    assert [item.ready for item in detail.objects] == [False]


def test_the_gate_dora_and_scheduling_questions(hub: Hub) -> None:
    with HubClient(hub.url, token=hub.read) as client:
        gate = client.gate("dev", commit=hub.dev_head, soak=timedelta(0))
        by_text = client.gate("dev", commit=hub.dev_head[:12], soak="0s", cluster_types=["drone"])
        decision = client.decision("dev", commit=hub.dev_head, soak=timedelta(0))
        promotable = client.promotable("dev", soak=0)
        dora = client.dora(environments=["dev", "stage"])
        rollouts = client.dora_deployments(environments=["stage"])
        assignments = client.assignments(environment="dev")
        errors = client.scheduling_errors()
        clusters = client.clusters(environment="stage", cluster_type="large")
        repositories = client.repositories()

    assert gate.target.commit == hub.dev_head
    assert gate.verdict in set(Verdict)
    assert gate.options.soak_seconds == 0
    assert [cluster.name for cluster in gate.clusters.items] == ["drone-dev"]
    assert by_text.target.commit == hub.dev_head
    assert decision.decision_schema == "fleetmark.gate.decision/v1"
    assert (decision.verdict, decision.allowed) == (gate.verdict, gate.verdict is Verdict.PASSED)
    assert decision.counts.expected == gate.counts.expected
    assert decision.evidence_url.startswith(f"{hub.url}/gate?environment=dev&commit=")
    assert promotable.environment == "dev"
    assert promotable.examined >= 1
    assert [figures.environment for figures in dora.environments] == ["dev", "stage"]
    assert rollouts.subject == "platform_commits"
    assert assignments.total == len(assignments.items)
    assert errors.items == []
    assert [cluster.name for cluster in clusters.items] == ["large-stage"]
    assert [repository.role for repository in repositories if repository.source == "api"] == [
        "platform"
    ]


def test_list_answers_become_dataframes(hub: Hub) -> None:
    with HubClient(hub.url, token=hub.read) as client:
        drift = client.drift(include_in_sync=True)
        dora = client.dora()
        history = client.history()
        empty = client.history(cluster="drone-dev", until=datetime(2001, 1, 1, tzinfo=UTC))

    frame = drift.to_dataframe()
    figures = dora.to_dataframe()
    changes = history.to_dataframe()

    assert len(frame) == len(drift.items)
    assert {"cluster", "object.kind", "desired.branch", "reasons"} <= set(frame.columns)
    assert set(frame["cluster"]) == {"drone-dev", "drone-stage", "large-stage"}
    # Times in UTC, at whatever resolution the installed pandas keeps them.
    assert isinstance(frame["last_seen_at"].dtype, pandas.DatetimeTZDtype)
    assert str(frame["last_seen_at"].dt.tz) == "UTC"
    assert list(figures["environment"]) == ["dev", "stage"]
    assert "lead_time.median_seconds" in figures.columns
    assert changes.groupby("cluster").size().to_dict() == {
        name: sum(1 for item in history.items if item.cluster == name)
        for name in {item.cluster for item in history.items}
    }
    assert isinstance(empty.to_dataframe(), pandas.DataFrame)
    assert len(empty.to_dataframe()) == 0
    assert list(empty.to_dataframe().columns) == list(changes.columns)


def test_a_script_asks_with_a_token_file(hub: Hub, tmp_path: Path) -> None:
    token_file = tmp_path / "read"
    token_file.write_text(f"{hub.read}\n")
    token_file.chmod(0o600)

    drift = HubClient(hub.url, token_file=token_file).drift(environment="stage")

    assert {item.cluster for item in drift.items} >= {"large-stage"}


def test_a_refusal_names_what_was_wrong(hub: Hub) -> None:
    with HubClient(hub.url, token=hub.read) as client:
        with pytest.raises(HubRefused) as unknown:
            client.drift(environment="prod")
        with pytest.raises(HubRefused) as invalid:
            client.history(limit=5000, since="yesterday")
        with pytest.raises(HubRefused) as forbidden:
            client.create_token("intruder")
    with pytest.raises(HubRefused) as unauthenticated:
        HubClient(hub.url, token="fma_nope").fleet()

    assert unknown.value.status == 404
    assert unknown.value.error == "unknown_environment"
    assert str(unknown.value) == "environment 'prod' is unknown (known: dev, stage) (HTTP 404)"
    assert invalid.value.status == 422
    assert [(p.location, p.field) for p in invalid.value.problems] == [
        ("query", "since"),
        ("query", "limit"),
    ]
    assert invalid.value.problems[1] == Problem(
        "query", "limit", "Input should be less than or equal to 1000"
    )
    assert (forbidden.value.status, forbidden.value.error) == (403, "insufficient_scope")
    assert "this needs a token with scope 'admin'; yours has 'read'" in str(forbidden.value)
    assert unauthenticated.value.status == 401
    assert str(unauthenticated.value) == "the API token is unknown or revoked (HTTP 401)"


def test_no_answer_and_bad_input_are_said_before_anything_is_sent(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "empty").write_text("\n")

    with pytest.raises(HubUnreachable, match=rf"^the hub at {nowhere} is unreachable: "):
        HubClient(nowhere, token="t").fleet()
    with pytest.raises(ValueError, match=r"'127\.0\.0\.1:8080' is not a hub's address"):
        HubClient("127.0.0.1:8080")
    with pytest.raises(ValueError, match="give token or token_file, not both"):
        HubClient(nowhere, token="t", token_file=tmp_path / "empty")
    with pytest.raises(ValueError, match=rf"^token_file {tmp_path / 'empty'}: is empty$"):
        HubClient(nowhere, token_file=tmp_path / "empty")
    with pytest.raises(ValueError, match=r": cannot be read \(No such file or directory\)$"):
        HubClient(nowhere, token_file=tmp_path / "missing")


def test_the_administration_operations(hub: Hub, tmp_path: Path) -> None:
    app = WorkRepo(tmp_path / "remotes" / "app-extra")
    app.commit("first", {"README.md": "extra\n"})
    control_plane, platform = reference_fleet(tmp_path / "fleet")
    with HubClient(hub.url, token=hub.admin) as client:
        registered = client.register_cluster(
            "script-1", environment="dev", cluster_type="drone", labels={"team": "platform"}
        )
        placed = client.place_cluster("script-1", environment="stage", cluster_type="drone")
        rotated = client.rotate_cluster_token("script-1")
        reply = client.report(
            report(
                "script-1",
                sequence=1,
                observed_at=hub.now,
                objects=[kustomization("app")],
                full_snapshot=True,
            ),
            cluster_token=rotated.token,
        )
        client.revoke_cluster_token("script-1")
        with pytest.raises(HubRefused) as revoked:
            client.report(
                report("script-1", sequence=2, observed_at=hub.now),
                cluster_token=rotated.token,
            )
        decommissioned = client.decommission_cluster("script-1")
        created = client.create_token("notebook", scope="read")
        client.revoke_token("notebook")
        tokens = {token.name: token for token in client.tokens()}
        added = client.add_repository(app.url, role="app", branches=["main"])
        harvested = client.wait_for_run(client.start_harvest(repository=app.url), interval=0.1)
        client.remove_repository(added.id)
        removed = [found for found in client.repositories() if found.id == added.id]
        scheduled = client.wait_for_run(
            client.start_schedule(
                control_plane=str(control_plane.path),
                gitops=str(platform.path),
                environments=["dev"],
            ),
            interval=0.1,
        )
        frame = client.tokens().to_dataframe()

    assert registered.token.startswith("fmc_")
    assert (placed.environment, placed.cluster_type, placed.labels) == (
        "stage",
        "drone",
        {"team": "platform"},
    )
    assert rotated.token != registered.token
    assert (reply.accepted, reply.duplicate) == (1, False)
    assert revoked.value.status == 401
    assert decommissioned.decommissioned_at is not None
    assert created.token.startswith("fma_")
    assert tokens["notebook"].revoked_at is not None
    assert tokens["script"].revoked_at is None
    assert harvested.outcome == "succeeded"
    assert harvested.harvest is not None
    assert [outcome.url for outcome in harvested.harvest.repositories] == [added.url]
    assert [found.enabled for found in removed] == [False]
    assert scheduled.outcome == "succeeded"
    assert scheduled.schedule is not None
    [outcome] = scheduled.schedule.environments
    assert outcome.commit == platform.head("dev")
    assert set(frame["name"]) == set(tokens)


def test_the_python_api_page_runs_as_written(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [example] = PYTHON_BLOCK.findall((ROOT / "docs" / "python.md").read_text())
    token_file = tmp_path / ".fleetmark" / "read"
    token_file.parent.mkdir()
    token_file.write_text(hub.read)
    token_file.chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))

    # The page asks for the last week before now; the hub's history is at its own clock's time.
    assert "datetime.now(UTC)" in example
    script = example.replace("http://127.0.0.1:8080", hub.url).replace(
        "datetime.now(UTC)", f"datetime.fromisoformat({hub.now.isoformat()!r})"
    )
    exec(compile(script, "python.md", "exec"), {})

    printed = capsys.readouterr().out
    assert "drifted objects in stage" in printed
    assert "large-stage has applied nothing yet; stage is at " in printed
    assert "Ready is False (ReconciliationSucceeded: sync failed)" in printed
    assert "drone-stage    1" in printed

"""GET /api/v1/gates/promotion and /api/v1/environments/{env}/promotable over HTTP: access,
the wire shape of the evidence, options, errors naming what is wrong, and promotable."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from hub.gate.policy import ClusterState
from hub.git.urls import normalise_repository_url
from tests.conftest import MakeAgent
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet, SimCluster
from tests.support import FakeClock, bearer

GATE = "/api/v1/gates/promotion"


def promotable_url(environment: str) -> str:
    return f"/api/v1/environments/{environment}/promotable"


async def get(client: httpx.AsyncClient, token: str, url: str, **params: Any) -> httpx.Response:
    return await client.get(url, params=params, headers=bearer(token))


async def ok(client: httpx.AsyncClient, token: str, url: str, **params: Any) -> dict[str, Any]:
    response = await get(client, token, url, **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def dev(fleet: Fleet) -> Fleet:
    """A drone (Flux) and a large (Argo CD) in dev, running nothing yet."""
    await fleet.add("drone-01", "drone")
    await fleet.add("large-01", "large")
    return fleet


async def soak(fleet: Fleet, clock: FakeClock, sha: str) -> datetime:
    """Every cluster runs `sha`, Ready, for ten minutes (reporting at both ends)."""
    for cluster in fleet.clusters.values():
        cluster.run_platform(sha)
    applied_at = clock.now
    await fleet.report()
    clock.advance(minutes=10)
    await fleet.report()
    return applied_at


async def test_the_gate_needs_a_read_token(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, admin_token: str
) -> None:
    head = dev.platform_heads["dev"]
    params = {"environment": "dev", "commit": head}

    anonymous = await client.get(GATE, params=params)
    unknown = await get(client, "fm-not-a-token", GATE, **params)

    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "not_authenticated"
    assert unknown.status_code == 401
    for token in (read_token, admin_token):
        assert (await get(client, token, GATE, **params)).status_code == 200
    assert (await client.get(promotable_url("dev"))).status_code == 401


async def test_a_passed_gate_with_its_evidence(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    applied_at = await soak(dev, clock, head)

    body = await ok(client, read_token, GATE, environment="dev", commit=head)

    platform = normalise_repository_url(dev.platform.url)
    assert body["verdict"] == "passed"
    assert body["target"] == {
        "kind": "platform_commit",
        "environment": "dev",
        "description": f"platform commit {head[:12]}",
        "repository": platform,
        "branch": "dev",
        "commit": head,
        "workload": None,
        "version": None,
        "assignments": [],
    }
    assert body["options"] == {
        "soak_seconds": 600.0,
        "stale_after_seconds": 600.0,
        "allow_stale": False,
        "min_clusters": 1,
        "min_converged_ratio": None,
        "max_time_to_converge_seconds": None,
        "halt_on_regression": False,
    }
    assert body["counts"] == {
        "expected": 2,
        "reporting": 2,
        "stale": 0,
        "never_reported": 0,
        "compliant": 2,
        "by_state": {state: 2 if state == "compliant" else 0 for state in ClusterState},
    }
    assert datetime.fromisoformat(body["evaluated_at"]) == clock.now
    assert datetime.fromisoformat(body["earliest_pass_at"]) == applied_at + timedelta(minutes=10)
    [harvested] = body["freshness"]["harvested"]
    assert (harvested["repository"], harvested["branch"], harvested["head_sha"]) == (
        platform,
        "dev",
        head,
    )
    assert datetime.fromisoformat(body["freshness"]["oldest_report_at"]) == clock.now
    drone = body["clusters"]["items"][0]
    assert drone == {
        "name": "drone-01",
        "cluster_type": "drone",
        "state": "compliant",
        "explanation": f"runs platform commit {head[:12]}, Ready and soaked",
        "object": "flux/Kustomization/flux-system/flux-system",
        "last_seen_at": clock.now.isoformat().replace("+00:00", "Z"),
        "applied_revision": f"dev@sha1:{head}",
        "attempted_revision": f"dev@sha1:{head}",
        "ready": True,
        "ready_since": applied_at.isoformat().replace("+00:00", "Z"),
        "soak_ends_at": (applied_at + timedelta(minutes=10)).isoformat().replace("+00:00", "Z"),
        "soak_remaining_seconds": 0.0,
        "reason": "ReconciliationSucceeded",
        "message": None,
    }


@pytest.mark.parametrize("soak_value", ["900", "PT15M", "15m", "14m60s"])
async def test_soak_takes_seconds_iso_8601_or_the_compact_form(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock, soak_value: str
) -> None:
    head = dev.platform_heads["dev"]
    applied_at = await soak(dev, clock, head)

    body = await ok(client, read_token, GATE, environment="dev", commit=head, soak=soak_value)

    assert body["options"]["soak_seconds"] == 900.0
    assert body["verdict"] == "pending"
    assert datetime.fromisoformat(body["earliest_pass_at"]) == applied_at + timedelta(minutes=15)


async def test_options_shape_the_verdict(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    await soak(dev, clock, head)

    at_least_three = await ok(
        client, read_token, GATE, environment="dev", commit=head, min_clusters=3
    )
    clock.advance(minutes=11)
    stale = await ok(client, read_token, GATE, environment="dev", commit=head)
    allowed = await ok(client, read_token, GATE, environment="dev", commit=head, allow_stale=True)

    assert at_least_three["verdict"] == "pending"
    assert at_least_three["reasons"] == ["2 cluster(s) expected in dev; at least 3 required"]
    assert stale["verdict"] == "pending"
    assert stale["counts"]["stale"] == 2
    assert allowed["verdict"] == "passed"


@pytest.fixture
async def mixed(fleet: Fleet) -> Fleet:
    """dev's head on three drones and a large: drone-02 failed its health check and drone-03
    never reported; the others soak."""
    head = fleet.platform_heads["dev"]
    for name in ("drone-01", "drone-02", "drone-03"):
        await fleet.add(name, "drone")
    await fleet.add("large-01", "large")
    for cluster in fleet.clusters.values():
        cluster.run_platform(head)
    fleet.clusters["drone-02"].run_platform(head, ready=False, reason="HealthCheckFailed")
    await fleet.report("drone-01", "drone-02", "large-01")
    return fleet


async def test_the_clusters_furthest_from_compliance_come_first_a_page_at_a_time(
    mixed: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    head = mixed.platform_heads["dev"]
    first = await ok(client, read_token, GATE, environment="dev", commit=head, limit=2)
    rest = await ok(client, read_token, GATE, environment="dev", commit=head, limit=2, offset=2)

    assert first["verdict"] == "failed"
    # Failed, then never reported, then by name among the soaking.
    assert [(c["name"], c["state"]) for c in first["clusters"]["items"]] == [
        ("drone-02", "failed"),
        ("drone-03", "never_reported"),
    ]
    assert [(c["name"], c["state"]) for c in rest["clusters"]["items"]] == [
        ("drone-01", "soaking"),
        ("large-01", "soaking"),
    ]
    assert {key: first["clusters"][key] for key in ("total", "limit", "offset")} == {
        "total": 4,
        "limit": 2,
        "offset": 0,
    }
    counts = first["counts"]["by_state"]
    assert {state: count for state, count in counts.items() if count} == {
        "failed": 1,
        "never_reported": 1,
        "soaking": 2,
    }


_STATES = list(ClusterState)


@pytest.mark.parametrize(
    ("sort", "column"),
    [
        ("-cluster", lambda item: item["name"]),
        ("-type", lambda item: item["cluster_type"]),
        ("-last_report", lambda item: item["last_seen_at"]),
        ("soak_ends", lambda item: item["soak_ends_at"]),
        ("-state", lambda item: _STATES.index(ClusterState(item["state"]))),
    ],
)
async def test_sorts_every_listed_cluster_so_each_page_follows_the_last(
    mixed: Fleet,
    client: httpx.AsyncClient,
    read_token: str,
    sort: str,
    column: Callable[[dict[str, Any]], Any],
) -> None:
    asked = {"environment": "dev", "commit": mixed.platform_heads["dev"]}
    own = await ok(client, read_token, GATE, **asked)
    pages = [
        await ok(client, read_token, GATE, **asked, sort=sort, limit=2, offset=offset)
        for offset in (0, 2)
    ]

    # Ties keep the gate's own order, as a stable sort of it does; None comes last.
    items = own["clusters"]["items"]
    known = [item for item in items if column(item) is not None]
    expected = sorted(known, key=column, reverse=sort.startswith("-")) + [
        item for item in items if column(item) is None
    ]
    names = [item["name"] for item in expected]
    assert names != [item["name"] for item in items]
    assert [item["name"] for page in pages for item in page["clusters"]["items"]] == names
    # Whatever the page shows, the verdict names the cluster that failed.
    assert all(page["reasons"] == own["reasons"] for page in pages)
    assert own["reasons"][0].startswith("drone-02: ")


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"soak": "ten minutes"}, "query.soak: Value error, 'ten minutes' is not a duration"),
        ({"soak": "-PT1M"}, "soak: must not be negative"),
        ({"min_clusters": "0"}, "query.min_clusters: Input should be greater than or equal to 1"),
        ({"limit": "0"}, "query.limit: Input should be greater than or equal to 1"),
        ({"offset": "-1"}, "query.offset: Input should be greater than or equal to 0"),
        ({"allow_stale": "maybe"}, "query.allow_stale: Input should be a valid boolean"),
        ({"commit": "not-a-sha"}, "commit: expected 7 to 64 hexadecimal digits, got 'not-a-sha'"),
        ({"commit": None}, "commit, or workload and version: give one of the two"),
        ({"workload": WORKLOAD, "version": "1.0.0"}, "commit, or workload and version"),
        ({"commit": None, "workload": WORKLOAD}, "commit, or workload and version"),
        ({"selector": "region in ()"}, "selector: region in (): give at least one value"),
        ({"selector": "region=east=west"}, "selector: cannot read 'region=east=west'"),
        (
            {"sort": "age"},
            "query.sort: no column 'age' to sort by (columns: cluster, type, state, "
            "last_report, soak_ends)",
        ),
    ],
    ids=[
        "soak-words",
        "soak-negative",
        "min-clusters-zero",
        "limit-zero",
        "offset-negative",
        "allow-stale-word",
        "commit-not-hex",
        "no-target",
        "two-targets",
        "workload-without-version",
        "selector-empty-set",
        "selector-unreadable",
        "sort-unknown",
    ],
)
async def test_bad_options_are_422_naming_the_field(
    dev: Fleet,
    client: httpx.AsyncClient,
    read_token: str,
    params: dict[str, str | None],
    detail: str,
) -> None:
    query = {"environment": "dev", "commit": dev.platform_heads["dev"]} | params

    response = await get(
        client, read_token, GATE, **{k: v for k, v in query.items() if v is not None}
    )

    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_input"
    assert response.json()["detail"].startswith(detail)


async def test_unknown_targets_are_404_naming_them(
    dev: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    head = dev.platform_heads["dev"]
    unharvested = dev.promote("Promote dev: not harvested yet", {"drone/README.md": "later\n"})

    environment = await get(client, read_token, GATE, environment="qa", commit=head)
    commit = await get(client, read_token, GATE, environment="dev", commit=unharvested)
    elsewhere = await get(
        client, read_token, GATE, environment="stage", commit=dev.platform_heads["dev"]
    )
    workload = await get(client, read_token, GATE, environment="dev", workload="x", version="1")
    version = await get(
        client, read_token, GATE, environment="dev", workload=WORKLOAD, version="9.9.9"
    )

    assert environment.status_code == 404
    assert environment.json() == {
        "error": "unknown_environment",
        "detail": "environment 'qa' is unknown (known: dev, stage)",
    }
    assert commit.status_code == 404
    assert commit.json()["error"] == "unknown_commit"
    platform = normalise_repository_url(dev.platform.url)
    assert commit.json()["detail"].startswith(
        f"commit {unharvested} is not on the platform branch of dev "
        f"(branch dev of {platform} is harvested up to {head[:12]} at "
    )
    assert commit.json()["detail"].endswith(" UTC)")
    assert elsewhere.json()["error"] == "unknown_commit"
    assert workload.status_code == 404
    assert workload.json()["error"] == "unknown_workload"
    assert workload.json()["detail"].startswith("workload 'x' is unknown (known: ")
    assert version.status_code == 404
    assert version.json() == {
        "error": "unknown_version",
        "detail": f"no harvested manifests of {WORKLOAD} in dev carry version '9.9.9' "
        "(now: functional-test on dev carries 1.0.0, performance-test on dev carries 1.0.0)",
    }
    unknown = await get(client, read_token, promotable_url("qa"))
    assert unknown.status_code == 404


async def test_a_commit_is_found_by_its_abbreviation(
    dev: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    head = dev.platform_heads["dev"]

    body = await ok(client, read_token, GATE, environment="dev", commit=head[:7].upper())

    assert body["target"]["commit"] == head


async def test_the_gate_for_a_workload_version(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    dev.clusters["drone-01"].run_app("functional-test", dev.app_heads["dev"])
    dev.clusters["large-01"].run_app("performance-test", dev.app_heads["dev"])
    await soak(dev, clock, dev.platform_heads["dev"])

    body = await ok(client, read_token, GATE, environment="dev", workload=WORKLOAD, version="1.0.0")

    assert body["verdict"] == "passed"
    assert body["target"]["kind"] == "workload_version"
    assert body["target"]["description"] == f"{WORKLOAD} 1.0.0"
    assert [c["object"] for c in body["clusters"]["items"]] == [
        "flux/Kustomization/flux-system/hello-world-app-functional-test",
        "argocd/Application/argocd/hello-world-app-performance-test",
    ]


async def test_promotable_is_the_newest_commit_that_passes(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    first = dev.platform_heads["dev"]
    await soak(dev, clock, first)
    second = dev.promote("Promote dev: drone config", {"drone/README.md": "edge\n"})
    await dev.harvest()
    # drone-01 moves on to the second commit and soaks it; large-01 stays at the first.
    dev.clusters["drone-01"].run_platform(second)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()

    older = await ok(client, read_token, promotable_url("dev"))
    bounded = await ok(client, read_token, promotable_url("dev"), max_commits=1)
    dev.clusters["large-01"].run_platform(second)
    await dev.report()
    clock.advance(minutes=10)
    await dev.report()
    newest = await ok(client, read_token, promotable_url("dev"))

    assert (older["commit"], older["examined"]) == (first, 2)
    assert older["reason"] == (
        f"{first[:12]} is the newest platform commit of dev that passes (2 examined)"
    )
    assert older["gate"]["verdict"] == "passed"
    assert older["gate"]["target"]["commit"] == first
    assert bounded == {
        "environment": "dev",
        "commit": None,
        "examined": 1,
        "reason": "none of the newest 1 platform commits of dev passes",
        "gate": None,
    }
    assert (newest["commit"], newest["examined"]) == (second, 1)


async def test_promotable_with_nothing_passing(
    dev: Fleet, client: httpx.AsyncClient, read_token: str
) -> None:
    body = await ok(client, read_token, promotable_url("dev"), soak="PT1H")

    # The dev branch holds the initial commit and the onboarding one; nothing ran yet.
    assert (body["commit"], body["examined"], body["gate"]) == (None, 2, None)
    too_many = await get(client, read_token, promotable_url("dev"), max_commits=501)
    assert too_many.status_code == 422
    assert too_many.json()["detail"].startswith("query.max_commits:")


async def test_the_gate_and_promotable_narrowed_by_cluster_type_and_label_selector(
    dev: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> None:
    head = dev.platform_heads["dev"]
    await soak(dev, clock, head)
    # A VM host that reports through the file source, and never has yet.
    await dev.add("vm-01", "small", labels={"source": "file", "region": "east"})

    def expected(body: dict[str, Any]) -> list[str]:
        return [cluster["name"] for cluster in body["clusters"]["items"]]

    everyone = await ok(client, read_token, GATE, environment="dev", commit=head)
    by_type = await ok(
        client,
        read_token,
        GATE,
        environment="dev",
        commit=head,
        cluster_type=["drone", "large"],
    )
    by_selector = await ok(
        client, read_token, GATE, environment="dev", commit=head, selector="source notin (file)"
    )
    the_vm = await ok(
        client, read_token, GATE, environment="dev", commit=head, selector="source,region=east"
    )
    promotable = await ok(
        client, read_token, promotable_url("dev"), selector="!source", cluster_type="drone"
    )

    assert everyone["verdict"] == "pending"
    assert expected(everyone) == ["vm-01", "drone-01", "large-01"]
    assert (by_type["verdict"], expected(by_type)) == ("passed", ["drone-01", "large-01"])
    assert (by_selector["verdict"], expected(by_selector)) == ("passed", ["drone-01", "large-01"])
    assert (the_vm["verdict"], expected(the_vm)) == ("pending", ["vm-01"])
    assert promotable["commit"] == head
    assert expected(promotable["gate"]) == ["drone-01"]


async def test_a_cluster_counts_where_an_admin_places_it_not_where_it_claims(
    dev: Fleet,
    client: httpx.AsyncClient,
    read_token: str,
    admin_token: str,
    make_agent: MakeAgent,
    clock: FakeClock,
) -> None:
    head = dev.platform_heads["dev"]
    await soak(dev, clock, head)
    rogue = SimCluster(await make_agent("rogue-01"), "dev", "drone", dev.platform.url, dev.app.url)
    rogue.run_platform(None, attempted=head, ready=False, reason="ReconciliationFailed")
    records = [record for records in rogue.objects.values() for record in records]
    await rogue.agent.send_ok(records, environment="dev", cluster_type="drone")

    claimed = await ok(client, read_token, GATE, environment="dev", commit=head)

    assert claimed["verdict"] == "passed"
    assert [item["name"] for item in claimed["clusters"]["items"]] == ["drone-01", "large-01"]
    placed = await client.put(
        "/api/v1/clusters/rogue-01/placement",
        json={"environment": "dev", "cluster_type": "drone"},
        headers=bearer(admin_token),
    )
    assert placed.status_code == 200, placed.text
    after = await ok(client, read_token, GATE, environment="dev", commit=head)
    assert after["verdict"] == "failed"
    assert "rogue-01" in [item["name"] for item in after["clusters"]["items"]]

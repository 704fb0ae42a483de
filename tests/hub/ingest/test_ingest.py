"""Report ingest: state, transitions, idempotency, ordering and snapshots, as a user sees them."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.conftest import MakeAgent, MakeClient, RegisterCluster
from tests.support import (
    PLATFORM_REPO,
    SHA_A,
    SHA_B,
    SHA_C,
    START,
    Agent,
    FakeClock,
    Store,
    kustomization,
)

V1 = f"dev@sha1:{SHA_A}"
V2 = f"dev@sha1:{SHA_B}"
V3 = f"dev@sha1:{SHA_C}"


async def test_first_report_creates_state_and_transitions(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    observed_at = clock.now - timedelta(seconds=5)
    reply = await agent.send_ok(
        [
            kustomization("hello-world-app-functional-test", V1),
            kustomization("infra", V2, ready=False, reason="BuildFailed", message="kustomize: x"),
        ],
        observed_at=observed_at,
    )

    assert reply == {"accepted": 2, "changed": 2, "duplicate": False, "warnings": []}
    objects = await store.objects(agent.cluster)
    assert set(objects) == {"hello-world-app-functional-test", "infra"}
    app = objects["hello-world-app-functional-test"]
    assert (app["reconciler"], app["kind"], app["namespace"]) == (
        "flux",
        "Kustomization",
        "flux-system",
    )
    assert app["applied_revision"] == V1
    assert app["applied_sha"] == SHA_A
    assert app["source_url"] == "https://github.com/contoso/platform-gitops"
    assert app["source_path"] == "drone/hello-world-app-functional-test"
    assert app["ready"] is True
    assert app["changed_at"] == app["first_seen_at"] == observed_at
    assert app["removed_at"] is None
    infra = objects["infra"]
    assert (infra["ready"], infra["reason"], infra["message"]) == (
        False,
        "BuildFailed",
        "kustomize: x",
    )

    transitions = await store.transitions(agent.cluster)
    assert [(t["name"], t["applied_sha"], t["removed"]) for t in transitions] == [
        ("hello-world-app-functional-test", SHA_A, False),
        ("infra", SHA_B, False),
    ]
    assert all(t["observed_at"] == observed_at for t in transitions)

    sessions = await store.agent_sessions(agent.cluster)
    assert set(sessions) == {"boot-1"}
    assert sessions["boot-1"]["max_sequence"] == 1
    assert sessions["boot-1"]["report_count"] == 1
    assert sessions["boot-1"]["agent_version"] == "0.1.0"
    assert sessions["boot-1"]["instance"] == "fleetmark-agent-7d9f"

    heartbeats = await store.heartbeats(agent.cluster)
    assert [(h["bucket_at"], h["report_count"], h["object_count"]) for h in heartbeats] == [
        (START.replace(minute=0, second=0), 1, 2)
    ]
    cluster = await store.cluster(agent.cluster)
    assert cluster["first_seen_at"] == cluster["last_seen_at"] == clock.now


async def test_duplicate_report_is_not_counted_twice(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    objects = [kustomization("app", V1), kustomization("infra", V1)]
    await agent.send_ok(objects, sequence=1)
    clock.advance(seconds=30)

    again = await agent.send_ok(objects, sequence=1)
    # Same sequence with other content: still the same report, so still a duplicate.
    changed = await agent.send_ok([kustomization("app", V2)], sequence=1, full_snapshot=True)

    assert again == {"accepted": 0, "changed": 0, "duplicate": True, "warnings": []}
    assert changed == again
    objects_now = await store.objects(agent.cluster)
    assert {name: row["applied_sha"] for name, row in objects_now.items()} == {
        "app": SHA_A,
        "infra": SHA_A,
    }
    assert all(row["removed_at"] is None for row in objects_now.values())
    assert len(await store.transitions(agent.cluster)) == 2
    assert (await store.agent_sessions(agent.cluster))["boot-1"]["report_count"] == 1
    assert [h["report_count"] for h in await store.heartbeats(agent.cluster)] == [1]


async def test_out_of_order_reports_are_each_taken_once(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    t1 = clock.now - timedelta(seconds=30)
    t2 = clock.now - timedelta(seconds=20)
    t3 = clock.now - timedelta(seconds=10)
    await agent.send_ok([kustomization("app", V1)], sequence=1, observed_at=t1)

    third = await agent.send_ok([kustomization("app", V3)], sequence=3, observed_at=t3)
    second = await agent.send_ok(
        [kustomization("app", V2), kustomization("late-newcomer", V2)], sequence=2, observed_at=t2
    )

    assert third == {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}
    # Sequence 2 is accepted: its new object is recorded, but its older view of "app"
    # does not overwrite what sequence 3 reported.
    assert second == {"accepted": 2, "changed": 1, "duplicate": False, "warnings": []}
    objects = await store.objects(agent.cluster)
    assert objects["app"]["applied_sha"] == SHA_C
    assert objects["app"]["changed_at"] == t3
    assert objects["late-newcomer"]["applied_sha"] == SHA_B

    recorded = [(t["name"], t["applied_sha"]) for t in await store.transitions(agent.cluster)]
    assert recorded.count(("app", SHA_C)) == recorded.count(("late-newcomer", SHA_B)) == 1
    assert recorded[-1] == ("app", SHA_C), "the newest state is the last transition"

    for sequence in (2, 3, 1):
        replay = await agent.send_ok([kustomization("app", V1)], sequence=sequence)
        assert replay["duplicate"] is True, sequence
    assert (await store.objects(agent.cluster))["app"]["applied_sha"] == SHA_C
    session = (await store.agent_sessions(agent.cluster))["boot-1"]
    assert (session["max_sequence"], session["report_count"]) == (3, 3)
    replayed = [(t["name"], t["applied_sha"]) for t in await store.transitions(agent.cluster)]
    assert replayed == recorded


async def test_new_boot_id_starts_a_new_sequence(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    for _ in range(5):
        await agent.send_ok([kustomization("app", V1)])
    clock.advance(minutes=2)

    agent.boot_id = "boot-2"
    restarted = await agent.send_ok([kustomization("app", V2)], sequence=1)

    assert restarted == {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}
    assert (await store.objects(agent.cluster))["app"]["applied_sha"] == SHA_B
    sessions = await store.agent_sessions(agent.cluster)
    assert {boot: row["max_sequence"] for boot, row in sessions.items()} == {
        "boot-1": 5,
        "boot-2": 1,
    }
    assert (await agent.send_ok([], sequence=1))["duplicate"] is True
    agent.boot_id = "boot-1"
    assert (await agent.send_ok([], sequence=5))["duplicate"] is True


async def test_full_snapshot_records_only_changed_objects(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    await agent.send_ok(
        [kustomization("a", V1), kustomization("b", V1), kustomization("c", V1)],
        full_snapshot=True,
    )
    clock.advance(minutes=1)

    reply = await agent.send_ok(
        [
            kustomization("a", V2),
            kustomization("b", V1),
            kustomization("c", V1, ready=False, reason="HealthCheckFailed"),
        ],
        full_snapshot=True,
    )

    assert reply == {"accepted": 3, "changed": 2, "duplicate": False, "warnings": []}
    later = [t for t in await store.transitions(agent.cluster) if t["observed_at"] == clock.now]
    assert [(t["name"], t["applied_sha"], t["ready"]) for t in later] == [
        ("a", SHA_B, True),
        ("c", SHA_A, False),
    ]
    objects = await store.objects(agent.cluster)
    assert objects["b"]["changed_at"] == START
    assert objects["a"]["changed_at"] == objects["c"]["changed_at"] == clock.now


async def test_object_missing_from_full_snapshot_is_removed_and_can_return(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    await agent.send_ok([kustomization("a", V1), kustomization("b", V1)], full_snapshot=True)
    removed_at = clock.advance(minutes=1)

    gone = await agent.send_ok([kustomization("a", V1)], full_snapshot=True)

    assert gone == {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}
    objects = await store.objects(agent.cluster)
    assert objects["a"]["removed_at"] is None
    assert objects["b"]["removed_at"] == removed_at
    removal = (await store.transitions(agent.cluster))[-1]
    assert (removal["name"], removal["removed"], removal["observed_at"]) == ("b", True, removed_at)

    back_at = clock.advance(minutes=1)
    back = await agent.send_ok([kustomization("b", V1)])

    assert back == {"accepted": 1, "changed": 1, "duplicate": False, "warnings": []}
    objects = await store.objects(agent.cluster)
    assert objects["b"]["removed_at"] is None
    assert objects["b"]["changed_at"] == back_at
    comeback = (await store.transitions(agent.cluster))[-1]
    assert (comeback["name"], comeback["removed"], comeback["observed_at"]) == ("b", False, back_at)


async def test_report_that_is_not_a_snapshot_removes_nothing(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    await agent.send_ok([kustomization("a", V1), kustomization("b", V1)], full_snapshot=True)
    clock.advance(minutes=1)

    reply = await agent.send_ok([kustomization("a", V2)], full_snapshot=False)

    assert reply["changed"] == 1
    objects = await store.objects(agent.cluster)
    assert objects["b"]["removed_at"] is None
    assert not any(t["removed"] for t in await store.transitions(agent.cluster))


async def test_empty_full_snapshot_removes_every_object(agent: Agent, store: Store) -> None:
    await agent.send_ok([kustomization("a", V1), kustomization("b", V1)], full_snapshot=True)
    agent.clock.advance(minutes=1)

    reply = await agent.send_ok([], full_snapshot=True)

    assert reply == {"accepted": 0, "changed": 2, "duplicate": False, "warnings": []}
    assert all(
        row["removed_at"] is not None for row in (await store.objects(agent.cluster)).values()
    )


async def test_reports_only_touch_their_own_cluster(make_agent: MakeAgent, store: Store) -> None:
    drone = await make_agent("drone-dev-1")
    large = await make_agent("large-dev-1")
    await drone.send_ok([kustomization("app", V1)], full_snapshot=True)

    await large.send_ok([kustomization("other", V2)], full_snapshot=True)

    assert (await store.objects("drone-dev-1"))["app"]["removed_at"] is None
    assert set(await store.objects("large-dev-1")) == {"other"}


async def test_large_report_and_unchanged_resend(agent: Agent, store: Store) -> None:
    objects = [kustomization(f"app-{index:04}", V1) for index in range(1000)]

    first = await agent.send_ok(objects, full_snapshot=True)
    agent.clock.advance(minutes=1)
    second = await agent.send_ok(objects, full_snapshot=True)

    assert first == {"accepted": 1000, "changed": 1000, "duplicate": False, "warnings": []}
    assert second == {"accepted": 1000, "changed": 0, "duplicate": False, "warnings": []}
    assert len(await store.objects(agent.cluster)) == 1000
    assert len(await store.transitions(agent.cluster)) == 1000
    assert [h["object_count"] for h in await store.heartbeats(agent.cluster)] == [1000]


async def test_heartbeats_are_bucketed_and_last_seen_moves(agent: Agent, store: Store) -> None:
    await agent.send_ok([kustomization("app", V1)])
    agent.clock.advance(minutes=1)
    await agent.send_ok([kustomization("app", V1)])
    last = agent.clock.advance(minutes=5)
    await agent.send_ok([kustomization("app", V1)])

    buckets = [(h["bucket_at"], h["report_count"]) for h in await store.heartbeats(agent.cluster)]
    assert buckets == [
        (START.replace(minute=0, second=0), 2),
        (START.replace(minute=5, second=0), 1),
    ]
    cluster = await store.cluster(agent.cluster)
    assert (cluster["first_seen_at"], cluster["last_seen_at"]) == (START, last)


async def test_future_observed_at_within_the_clock_skew_is_clamped_to_the_hub_clock(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    await agent.send_ok([kustomization("app", V1)], observed_at=clock.now + timedelta(minutes=4))

    assert (await store.objects(agent.cluster))["app"]["changed_at"] == clock.now
    assert [t["observed_at"] for t in await store.transitions(agent.cluster)] == [clock.now]

    # The clamp keeps the state correctable: the next honest report is newer, not older.
    clock.advance(seconds=1)
    await agent.send_ok([kustomization("app", V2)])
    assert (await store.objects(agent.cluster))["app"]["applied_sha"] == SHA_B


FAR_FUTURE = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


@pytest.mark.parametrize(
    ("future", "field"),
    [
        ({"observed_at": FAR_FUTURE}, "observed_at"),
        ({"observed_at": START + timedelta(minutes=5, seconds=1)}, "observed_at"),
        ({"last_transition_at": FAR_FUTURE}, "objects.0.last_transition_at"),
    ],
    ids=["year-9999", "just-past-the-skew", "last-transition"],
)
async def test_report_from_beyond_the_clock_skew_is_refused_and_changes_nothing(
    agent: Agent, store: Store, clock: FakeClock, future: dict[str, datetime], field: str
) -> None:
    await agent.send_ok([kustomization("app", V1)])
    before = (await store.objects(agent.cluster))["app"]

    observed_at = future.get("observed_at", clock.now)
    ahead = (
        {"last_transition_at": future["last_transition_at"].isoformat()}
        if ("last_transition_at" in future)
        else {}
    )
    refused = await agent.send([kustomization("app", V2, **ahead)], observed_at=observed_at)

    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "invalid_input"
    assert refused.json()["detail"].startswith(f"{field}: ")
    assert "ahead of the hub's clock" in refused.json()["detail"]
    assert (await store.objects(agent.cluster))["app"] == before
    # A later report with the right time is applied.
    clock.advance(seconds=1)
    assert (await agent.send_ok([kustomization("app", V3)]))["changed"] == 1
    assert (await store.objects(agent.cluster))["app"]["applied_sha"] == SHA_C


async def test_clock_skew_allowed_is_configurable(
    make_client: MakeClient, register_cluster: RegisterCluster, clock: FakeClock
) -> None:
    client = await make_client(ingest_max_clock_skew=timedelta(0))
    agent = Agent(client, clock, "drone-dev-1", await register_cluster("drone-dev-1"))

    response = await agent.send(
        [kustomization("app")], observed_at=clock.now + timedelta(seconds=1)
    )

    assert response.status_code == 422
    assert response.json()["detail"].startswith("observed_at: ")


async def test_report_spooled_for_hours_is_still_accepted(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    observed_at = clock.now - timedelta(hours=6)

    await agent.send_ok([kustomization("app", V1)], observed_at=observed_at)

    assert (await store.objects(agent.cluster))["app"]["changed_at"] == observed_at


async def test_state_a_future_time_froze_in_the_store_is_freed_by_the_next_report(
    agent: Agent, store: Store, clock: FakeClock, session: AsyncSession
) -> None:
    await agent.send_ok([kustomization("app", V1), kustomization("gone", V1)])
    # A store written before reports from the future were refused (or by a hub whose own
    # clock ran ahead) may hold such a time.
    await session.execute(
        text("UPDATE object_state SET changed_at = :future"), {"future": FAR_FUTURE}
    )

    clock.advance(minutes=1)
    reply = await agent.send_ok([kustomization("app", V2)], full_snapshot=True)

    assert reply["changed"] == 2
    objects = await store.objects(agent.cluster)
    assert (objects["app"]["applied_sha"], objects["app"]["changed_at"]) == (SHA_B, clock.now)
    assert objects["gone"]["removed_at"] == clock.now


async def test_each_object_keeps_since_when_it_runs_its_revision_and_is_ready(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    first = clock.now
    await agent.send_ok([kustomization("a", V1)], full_snapshot=True)
    clock.advance(minutes=1)
    await agent.send_ok([kustomization("a", V1, message="still applied")], full_snapshot=True)
    progressing_at = clock.advance(minutes=1)
    await agent.send_ok(
        [kustomization("a", V1, attempted_revision=V2, ready=None, reason="Progressing")],
        full_snapshot=True,
    )
    progressing = (await store.objects(agent.cluster))["a"]
    applied_at = clock.advance(minutes=1)
    await agent.send_ok([kustomization("a", V2)], full_snapshot=True)
    applied = (await store.objects(agent.cluster))["a"]
    clock.advance(minutes=1)
    await agent.send_ok([], full_snapshot=True)
    back_at = clock.advance(minutes=1)
    await agent.send_ok([kustomization("a", V2)], full_snapshot=True)
    back = (await store.objects(agent.cluster))["a"]

    # A message or a Ready period ending leaves the run of V1 as it was; not Ready has no since.
    assert progressing_at > first
    assert (progressing["applied_since"], progressing["ready_since"]) == (first, None)
    assert (applied["applied_since"], applied["ready_since"]) == (applied_at, applied_at)
    # Removed and back: both start anew.
    assert (back["applied_since"], back["ready_since"]) == (back_at, back_at)


async def test_revisions_of_no_known_form_are_kept_and_named_in_a_warning(
    agent: Agent, store: Store
) -> None:
    reply = await agent.send_ok(
        [
            kustomization("short", "main@sha1:1234567"),
            kustomization("chart", "1.4.2+build.7"),
            kustomization("attempt", attempted_revision="latest"),
        ]
    )

    assert reply["accepted"] == 3
    assert reply["warnings"] == [
        "flux Kustomization flux-system/short: applied_revision 'main@sha1:1234567' matches no "
        "known revision form (<branch>@sha1:<sha>, <branch>/<sha>, a bare sha, "
        "<tag>@sha256:<digest> or a chart version); it is judged unknown_revision",
        "flux Kustomization flux-system/short: attempted_revision 'main@sha1:1234567' matches no "
        "known revision form (<branch>@sha1:<sha>, <branch>/<sha>, a bare sha, "
        "<tag>@sha256:<digest> or a chart version); it is judged unknown_revision",
        "flux Kustomization flux-system/attempt: attempted_revision 'latest' matches no "
        "known revision form (<branch>@sha1:<sha>, <branch>/<sha>, a bare sha, "
        "<tag>@sha256:<digest> or a chart version); it is judged unknown_revision",
    ]
    assert (await store.objects(agent.cluster))["short"]["applied_revision"] == "main@sha1:1234567"


async def test_objects_seen_first_began_when_their_cluster_says_within_the_backdate_limit(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    """A hub new to a fleet that has been Ready for days takes the reported transition time:
    never after the report, never more than FLEETMARK_INGEST_MAX_BACKDATE (a day) before it."""
    now = clock.now

    def since(delta: timedelta) -> str:
        return (now - delta).isoformat()

    await agent.send_ok(
        [
            kustomization("hours", last_transition_at=since(timedelta(hours=5))),
            kustomization("days", last_transition_at=since(timedelta(days=3))),
            kustomization("ahead", last_transition_at=since(timedelta(minutes=-2))),
            kustomization("unsaid"),
            kustomization("failing", ready=False, last_transition_at=since(timedelta(hours=1))),
        ],
        full_snapshot=True,
    )
    clock.advance(minutes=1)
    await agent.send_ok([], full_snapshot=True)
    back_at = clock.advance(minutes=1)
    await agent.send_ok(
        [kustomization("hours", last_transition_at=since(timedelta(hours=5)))], full_snapshot=True
    )

    objects = await store.objects(agent.cluster)
    began = {
        name: (objects[name]["applied_since"], objects[name]["ready_since"])
        for name in ("days", "ahead", "unsaid", "failing")
    }
    assert began == {
        "days": (now - timedelta(days=1), now - timedelta(days=1)),
        "ahead": (now, now),
        "unsaid": (now, now),
        "failing": (now - timedelta(hours=1), None),
    }
    # Removed and back: seen anew, so the cluster's word counts again.
    assert back_at > now
    assert (objects["hours"]["applied_since"], objects["hours"]["ready_since"]) == (
        now - timedelta(hours=5),
        now - timedelta(hours=5),
    )


async def test_each_object_keeps_the_ref_of_the_repository_whose_revisions_it_applies(
    agent: Agent, store: Store, clock: FakeClock
) -> None:
    follower = {"ref": "GitRepository/flux-system/flux-system", "url_ref": "dev"}
    records = [
        kustomization("apps", source={"url": PLATFORM_REPO, **follower, "path": "./apps"}),
        # A source object fetches and applies nothing, whatever its record says.
        kustomization(
            "flux-system",
            kind="GitRepository",
            applied_revision=None,
            source={"url": PLATFORM_REPO, "ref": "dev", "url_ref": "dev"},
        ),
        kustomization("platform", reconciler="argocd", kind="Application", namespace="argocd"),
    ]
    await agent.send_ok(records, full_snapshot=True)
    first = await store.objects(agent.cluster)
    # The GitRepository moves to main: the agent sends its follower again with the new ref,
    # and nothing else of the follower changed.
    clock.advance(minutes=1)
    moved = {"url": PLATFORM_REPO, **follower, "url_ref": "main", "path": "./apps"}
    reply = await agent.send_ok([kustomization("apps", source=moved)])
    after = await store.objects(agent.cluster)

    assert {name: row["url_ref"] for name, row in first.items()} == {
        "apps": "dev",
        "flux-system": None,
        "platform": "dev",
    }
    assert reply["changed"] == 1
    assert after["apps"]["url_ref"] == "main"
    assert [
        t["url_ref"] for t in await store.transitions(agent.cluster) if t["name"] == "apps"
    ] == [
        "dev",
        "main",
    ]

"""The agent's report contract v1: its JSON body, its limits, and the hub accepting it."""

import json
from datetime import datetime

import pytest
from pydantic import ValidationError

from agent.client import MAX_REPORT_BYTES_HEADER
from agent.report import (
    MAX_MESSAGE_CHARS,
    MAX_TEXT_CHARS,
    AgentIdentity,
    ClusterIdentity,
    ObjectRecord,
    Report,
    SkippedKind,
    SnapshotPart,
    Source,
    split,
)
from hub.ingest import schemas as hub
from tests.agent.examples import EARLIER_AT, NOW, SHA_A

CLUSTER = ClusterIdentity(name="drone-dev-1", environment="dev", labels={"region": "east-us"})
AGENT = AgentIdentity(version="0.1.0", boot_id="5b0f8f3e-boot", instance="fleetmark-agent-x7k2p")


def kustomization(name: str = "apps", **fields: object) -> ObjectRecord:
    values: dict[str, object] = {
        "reconciler": "flux",
        "kind": "Kustomization",
        "namespace": "flux-system",
        "name": name,
        "source": Source(ref="GitRepository/flux-system/platform", path="./apps"),
        "applied_revision": f"main@sha1:{SHA_A}",
        "attempted_revision": f"main@sha1:{SHA_A}",
        "ready": True,
        "reason": "ReconciliationSucceeded",
        "health": "Healthy",
        "last_transition_at": EARLIER_AT,
    }
    values.update(fields)
    return ObjectRecord.model_validate(values)


def report(*objects: ObjectRecord, sequence: int = 1) -> Report:
    return Report(
        cluster=CLUSTER,
        agent=AGENT,
        sequence=sequence,
        observed_at=NOW,
        full_snapshot=True,
        objects=objects,
    )


def test_body_uses_the_contract_field_names() -> None:
    body = json.loads(report(kustomization()).to_json())

    assert body["schema"] == "fleetmark.report/v1"
    assert "report_schema" not in body
    assert body["cluster"] == {
        "name": "drone-dev-1",
        "environment": "dev",
        "cluster_type": None,
        "labels": {"region": "east-us"},
    }
    assert body["agent"]["boot_id"] == "5b0f8f3e-boot"
    assert body["sequence"] == 1
    assert datetime.fromisoformat(body["observed_at"]) == NOW
    assert body["full_snapshot"] is True
    assert body["objects"][0]["applied_revision"] == f"main@sha1:{SHA_A}"
    assert body["objects"][0]["source"]["ref"] == "GitRepository/flux-system/platform"


def test_hub_accepts_the_body_the_agent_sends() -> None:
    sent = report(kustomization("apps"), kustomization("infra", ready=False, message="failed"))

    received = hub.Report.model_validate_json(sent.to_json())

    assert received.cluster.name == "drone-dev-1"
    assert received.sequence == 1
    assert [record.name for record in received.objects] == ["apps", "infra"]
    assert received.objects[1].ready is False
    assert received.objects[0].last_transition_at == EARLIER_AT


def test_hub_accepts_the_kinds_the_agent_skipped() -> None:
    skipped = SkippedKind(
        kind="Application", api_group="argoproj.io", reason="its CustomResourceDefinition is absent"
    )
    sent = report(kustomization()).model_copy(update={"skipped_kinds": (skipped,)})

    received = hub.Report.model_validate_json(sent.to_json())

    assert [(kind.kind, kind.api_group, kind.reason) for kind in received.skipped_kinds] == [
        ("Application", "argoproj.io", "its CustomResourceDefinition is absent")
    ]


def test_spooled_body_reads_back_as_the_same_report() -> None:
    sent = report(kustomization(), sequence=42)

    assert Report.model_validate_json(sent.to_json()) == sent


@pytest.mark.parametrize("sequence", [0, -1, 2**62 + 1])
def test_sequence_outside_the_contract_is_refused(sequence: int) -> None:
    with pytest.raises(ValidationError, match="sequence"):
        report(sequence=sequence)


def test_naive_observation_time_is_refused() -> None:
    with pytest.raises(ValidationError, match="observed_at"):
        Report(cluster=CLUSTER, agent=AGENT, sequence=1, observed_at=datetime(2026, 11, 22, 12))


def test_fields_the_hub_does_not_know_cannot_be_added() -> None:
    with pytest.raises(ValidationError, match="cluster_state"):
        Report.model_validate(
            {
                "schema": "fleetmark.report/v1",
                "cluster": {"name": "drone-dev-1"},
                "agent": {"version": "0.1.0", "boot_id": "b", "instance": "i"},
                "sequence": 1,
                "observed_at": NOW.isoformat(),
                "cluster_state": "Ready",
            }
        )


def test_other_schema_versions_are_refused() -> None:
    with pytest.raises(ValidationError, match="schema"):
        Report.model_validate(
            {
                "schema": "fleetmark.report/v2",
                "cluster": {"name": "drone-dev-1"},
                "agent": {"version": "0.1.0", "boot_id": "b", "instance": "i"},
                "sequence": 1,
                "observed_at": NOW.isoformat(),
            }
        )


def test_one_object_twice_in_a_report_is_refused() -> None:
    with pytest.raises(ValidationError, match="flux Kustomization flux-system/apps appears more"):
        report(kustomization("apps"), kustomization("apps", ready=False))


def test_cluster_identity_with_a_nul_character_is_refused() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        ClusterIdentity(name="drone\x00dev")


def test_cluster_text_is_made_to_fit_what_the_hub_stores() -> None:
    record = kustomization(
        message="x" * (MAX_MESSAGE_CHARS + 500),
        reason="Build\x00Failed",
        applied_revision="r" * (MAX_TEXT_CHARS + 1),
        health="Healthy-but-with-a-very-long-health-word",
        name="web\ud800",
    )

    assert record.message is not None
    assert len(record.message) == MAX_MESSAGE_CHARS
    assert record.message.endswith("[truncated by the agent]")
    assert record.reason == "BuildFailed"
    assert record.applied_revision is not None
    assert len(record.applied_revision) == MAX_TEXT_CHARS
    assert record.health is not None
    assert len(record.health) == 32
    assert record.name == "web?"
    hub.Report.model_validate_json(report(record).to_json())


def test_record_without_a_name_cannot_be_built() -> None:
    with pytest.raises(ValidationError, match="name must not be empty"):
        kustomization(name="\x00")


def test_hub_accepts_the_parts_of_a_snapshot_split_under_a_limit() -> None:
    whole = report(*(kustomization(f"app-{index:03d}") for index in range(60)))

    parts = split(whole, 8_000, snapshot_id="5b0f8f3e-snap")

    assert len(parts) > 1
    received = [hub.Report.model_validate_json(part.to_json()) for part in parts]
    assert all(len(part.to_json()) <= 8_000 for part in parts)
    assert [
        (r.snapshot_part.id, r.snapshot_part.index, r.snapshot_part.count)
        for r in received
        if r.snapshot_part
    ] == [("5b0f8f3e-snap", index, len(parts)) for index in range(len(parts))]
    assert not any(r.full_snapshot for r in received)
    assert [o.name for r in received for o in r.objects] == [o.name for o in whole.objects]


def test_a_report_that_fits_is_sent_as_it_is_without_a_part() -> None:
    whole = report(kustomization())

    assert split(whole, 8_000, snapshot_id="s") == [whole]
    assert "snapshot_part" not in json.loads(whole.to_json())


def test_a_part_cannot_claim_to_be_a_whole_snapshot() -> None:
    with pytest.raises(ValidationError, match="not a full snapshot"):
        report(kustomization()).model_validate(
            {
                **json.loads(report(kustomization()).to_json()),
                "snapshot_part": {"id": "s", "index": 0, "count": 2},
            }
        )
    with pytest.raises(ValidationError, match="index 2 is not below count 2"):
        SnapshotPart(id="s", index=2, count=2)


def test_agent_and_hub_name_the_same_limit_header() -> None:
    assert MAX_REPORT_BYTES_HEADER == hub.MAX_REPORT_BYTES_HEADER

"""Argo CD Applications to report records: applied versus compared revisions, drift, health."""

from datetime import UTC, datetime

import pytest

from agent.report import Source
from agent.sources import argocd
from tests.agent.examples import (
    APP_REPO,
    CHART_REPO,
    EARLIER,
    EARLIER_AT,
    LATER,
    LATER_AT,
    NOW,
    SHA_A,
    SHA_B,
    SHA_C,
    VALUES_REPO,
    application,
    history_entry,
    multi_source_application,
)


def test_synced_healthy_application_is_ready_at_its_applied_revision() -> None:
    record = argocd.application(application(applied=SHA_A), NOW)

    assert record.reconciler == "argocd"
    assert record.kind == "Application"
    assert (record.namespace, record.name) == ("argocd", "guestbook")
    assert record.source == Source(url=APP_REPO, ref="HEAD", path="guestbook")
    assert record.applied_revision == SHA_A
    assert record.attempted_revision == SHA_A
    assert record.ready is True
    assert record.reason == "Synced"
    assert record.health == "Healthy"
    assert record.drifted is False
    assert record.last_transition_at == EARLIER_AT


def test_out_of_sync_with_a_newer_revision_is_pending_not_drift() -> None:
    record = argocd.application(application(applied=SHA_A, compared=SHA_B, sync="OutOfSync"), NOW)

    assert record.applied_revision == SHA_A
    assert record.attempted_revision == SHA_B
    assert record.drifted is False
    assert record.ready is None
    assert record.reason == "OutOfSync"
    assert record.message is not None
    assert SHA_B in record.message


def test_out_of_sync_against_the_applied_revision_is_live_drift() -> None:
    record = argocd.application(application(applied=SHA_A, compared=SHA_A, sync="OutOfSync"), NOW)

    assert record.drifted is True
    assert record.applied_revision == SHA_A
    assert record.attempted_revision == SHA_A
    assert record.ready is None
    assert record.reason == "Drifted"


def test_out_of_sync_without_a_compared_revision_is_drift_against_an_unknown_revision() -> None:
    obj = application(applied=SHA_A, sync="OutOfSync")
    del obj["status"]["sync"]["revision"]

    record = argocd.application(obj, NOW)

    assert record.drifted is True
    assert record.ready is None
    assert record.reason == "ComparedRevisionUnknown"
    assert record.message is not None
    assert "compared against is unknown" in record.message
    assert record.applied_revision == SHA_A
    assert record.attempted_revision is None


def test_out_of_sync_application_without_any_revision_is_not_in_sync() -> None:
    obj = application(sync="OutOfSync", health="Missing")
    del obj["status"]["sync"]["revision"]
    del obj["status"]["operationState"]
    del obj["status"]["history"]

    record = argocd.application(obj, NOW)

    assert (record.applied_revision, record.attempted_revision) == (None, None)
    assert record.drifted is True
    assert record.reason == "ComparedRevisionUnknown"


def test_multi_source_out_of_sync_without_compared_revisions_is_drift() -> None:
    obj = multi_source_application(
        applied=["1.4.0", SHA_A], compared=["1.4.0", SHA_A], sync="OutOfSync"
    )
    del obj["status"]["sync"]["revisions"]

    record = argocd.application(obj, NOW)

    assert record.drifted is True
    assert record.reason == "ComparedRevisionUnknown"


def test_drift_is_recognised_across_revision_forms() -> None:
    obj = application(applied=SHA_A, compared=SHA_A.upper(), sync="OutOfSync")

    assert argocd.application(obj, NOW).drifted is True


def test_applied_revision_is_never_the_compared_one() -> None:
    """A commit outside the app's path leaves it Synced at that commit, which no sync deployed."""
    obj = application(applied=SHA_A, compared=SHA_B)
    del obj["status"]["operationState"]

    record = argocd.application(obj, NOW)

    assert record.applied_revision == SHA_A  # the newest history entry
    assert record.attempted_revision == SHA_B


def test_without_operation_state_the_newest_history_entry_is_applied() -> None:
    obj = application(applied=SHA_A)
    del obj["status"]["operationState"]
    obj["status"]["history"] = [history_entry(SHA_C, 1), history_entry(SHA_B, 2, LATER)]
    obj["status"]["sync"]["revision"] = SHA_B

    record = argocd.application(obj, NOW)

    assert record.applied_revision == SHA_B
    assert record.last_transition_at == LATER_AT


def test_failed_sync_reports_the_attempt_and_keeps_what_runs() -> None:
    obj = application(applied=SHA_A, compared=SHA_B, sync="OutOfSync", health="Healthy")
    obj["status"]["operationState"] = {
        "operation": {"sync": {"revision": SHA_B}, "initiatedBy": {"automated": True}},
        "phase": "Failed",
        "message": 'one or more objects failed to apply, reason: Deployment "web" is invalid',
        "startedAt": "2026-11-22T11:29:00Z",
        "finishedAt": LATER,
        "retryCount": 5,
        "syncResult": {"revision": SHA_B, "resources": []},
    }

    record = argocd.application(obj, NOW)

    assert record.applied_revision == SHA_A
    assert record.attempted_revision == SHA_B
    assert record.ready is False
    assert record.reason == "SyncFailed"
    assert record.message is not None
    assert "failed to apply" in record.message
    assert record.last_transition_at == LATER_AT


def test_errored_sync_is_not_ready() -> None:
    obj = application(applied=SHA_A)
    obj["status"]["operationState"]["phase"] = "Error"
    obj["status"]["operationState"]["message"] = "rpc error: code = Unknown"

    record = argocd.application(obj, NOW)

    assert record.ready is False
    assert record.reason == "SyncError"
    assert record.message == "rpc error: code = Unknown"


def test_running_sync_attempts_its_revision_and_is_not_settled() -> None:
    obj = application(applied=SHA_A, compared=SHA_B, sync="OutOfSync", health="Progressing")
    obj["status"]["operationState"] = {
        "operation": {"sync": {"revision": SHA_B}},
        "phase": "Running",
        "message": "waiting for healthy state of apps/Deployment/web",
        "startedAt": LATER,
    }

    record = argocd.application(obj, NOW)

    assert record.applied_revision == SHA_A
    assert record.attempted_revision == SHA_B
    assert record.ready is None
    assert record.reason == "Syncing"
    assert record.health == "Progressing"


def test_dry_run_sync_does_not_count_as_applied() -> None:
    obj = application(applied=SHA_A, compared=SHA_B, sync="OutOfSync")
    obj["status"]["operationState"]["operation"]["sync"] = {"revision": SHA_B, "dryRun": True}
    obj["status"]["operationState"]["syncResult"]["revision"] = SHA_B

    assert argocd.application(obj, NOW).applied_revision == SHA_A


@pytest.mark.parametrize(
    ("health", "ready", "reason"),
    [
        ("Degraded", False, "Degraded"),
        ("Progressing", None, "Progressing"),
        ("Missing", None, "Missing"),
        ("Suspended", None, "Suspended"),
        ("Unknown", None, "Unknown"),
    ],
)
def test_health_of_a_synced_application(health: str, ready: bool | None, reason: str) -> None:
    record = argocd.application(application(health=health), NOW)

    assert record.health == health
    assert record.ready is ready
    assert record.reason == reason


def test_comparison_error_condition_fails_the_application() -> None:
    obj = application(applied=SHA_A, sync="Unknown")
    obj["status"]["conditions"] = [
        {
            "type": "ComparisonError",
            "message": "Failed to load target state: repository not found",
            "lastTransitionTime": LATER,
        },
        {"type": "OrphanedResourceWarning", "message": "1 orphaned resource"},
    ]

    record = argocd.application(obj, NOW)

    assert record.ready is False
    assert record.reason == "ComparisonError"
    assert record.message == "Failed to load target state: repository not found"
    assert record.last_transition_at == LATER_AT


def test_warning_conditions_do_not_fail_the_application() -> None:
    obj = application()
    obj["status"]["conditions"] = [
        {
            "type": "OrphanedResourceWarning",
            "message": "1 orphaned resource",
            "lastTransitionTime": EARLIER,
        }
    ]

    assert argocd.application(obj, NOW).ready is True


def test_skip_reconcile_annotation_marks_the_application_suspended() -> None:
    obj = application()
    obj["metadata"]["annotations"] = {"argocd.argoproj.io/skip-reconcile": "true"}

    assert argocd.application(obj, NOW).suspended is True
    assert argocd.application(application(), NOW).suspended is False


def test_helm_chart_application_reports_chart_and_version() -> None:
    obj = application(applied="15.1.0")
    chart = {
        "repoURL": "https://charts.bitnami.com/bitnami",
        "chart": "nginx",
        "targetRevision": "15.1.*",
    }
    obj["spec"]["source"] = chart

    record = argocd.application(obj, NOW)

    assert record.source == Source(
        url="https://charts.bitnami.com/bitnami", ref="15.1.*", path="nginx"
    )
    assert record.applied_revision == "15.1.0"


def test_new_application_never_synced_has_nothing_applied() -> None:
    obj = application(compared=SHA_B, sync="OutOfSync", health="Missing")
    del obj["status"]["operationState"]
    del obj["status"]["history"]

    record = argocd.application(obj, NOW)

    assert record.applied_revision is None
    assert record.attempted_revision == SHA_B
    assert record.drifted is False
    assert record.ready is None
    assert record.message is not None
    assert "nothing applied yet" in record.message


def test_application_without_status_is_unknown() -> None:
    obj = application()
    del obj["status"]

    record = argocd.application(obj, NOW)

    assert record.ready is None
    assert record.reason == "StatusMissing"
    assert record.source == Source(url=APP_REPO, ref="HEAD", path="guestbook")


def test_health_transition_after_the_sync_is_the_last_transition() -> None:
    obj = application()
    obj["status"]["health"] = {"status": "Degraded", "lastTransitionTime": LATER}

    assert argocd.application(obj, NOW).last_transition_at == LATER_AT


# --- multi-source --------------------------------------------------------------------------


def test_multi_source_application_follows_the_source_that_renders_manifests() -> None:
    obj = multi_source_application(applied=["1.4.0", SHA_A], compared=["1.4.0", SHA_A])

    record = argocd.application(obj, NOW)

    assert record.source == Source(url=CHART_REPO, ref="1.4.0", path="web")
    assert record.applied_revision == "1.4.0"
    assert record.attempted_revision == "1.4.0"
    assert record.ready is True


def test_multi_source_choice_does_not_depend_on_the_order_of_sources() -> None:
    obj = multi_source_application(
        applied=[SHA_A, "1.4.0"], compared=[SHA_A, "1.4.1"], sync="OutOfSync", values_first=True
    )

    record = argocd.application(obj, NOW)

    assert record.source == Source(url=CHART_REPO, ref="1.4.0", path="web")
    assert record.applied_revision == "1.4.0"
    assert record.attempted_revision == "1.4.1"
    assert record.drifted is False


def test_multi_source_drift_when_every_source_is_at_its_applied_revision() -> None:
    obj = multi_source_application(
        applied=["1.4.0", SHA_A], compared=["1.4.0", SHA_A], sync="OutOfSync"
    )

    record = argocd.application(obj, NOW)

    assert record.drifted is True
    assert record.reason == "Drifted"


def test_multi_source_pending_values_revision_is_not_drift_and_is_named() -> None:
    obj = multi_source_application(
        applied=["1.4.0", SHA_A], compared=["1.4.0", SHA_B], sync="OutOfSync"
    )

    record = argocd.application(obj, NOW)

    assert record.drifted is False
    assert record.reason == "OutOfSync"
    assert record.applied_revision == record.attempted_revision == "1.4.0"
    assert record.message is not None
    assert f"source 2 ({VALUES_REPO}): revision {SHA_B}" in record.message
    assert f"applied: {SHA_A}" in record.message


def test_multi_source_applied_comes_from_history_when_the_last_sync_failed() -> None:
    obj = multi_source_application(
        applied=["1.4.0", SHA_A], compared=["1.5.0", SHA_A], sync="OutOfSync"
    )
    obj["status"]["operationState"]["phase"] = "Failed"
    obj["status"]["operationState"]["syncResult"]["revisions"] = ["1.5.0", SHA_A]
    obj["status"]["operationState"]["finishedAt"] = datetime(
        2026, 11, 22, 11, 40, tzinfo=UTC
    ).isoformat()

    record = argocd.application(obj, NOW)

    assert record.applied_revision == "1.4.0"
    assert record.attempted_revision == "1.5.0"
    assert record.ready is False


def test_multi_source_status_carrying_a_single_revision_too_is_read_per_source() -> None:
    obj = multi_source_application(
        applied=[SHA_A, "1.4.0"], compared=[SHA_A, "1.4.0"], values_first=True
    )
    obj["status"]["operationState"]["syncResult"]["revision"] = SHA_A
    obj["status"]["sync"]["revision"] = SHA_A

    record = argocd.application(obj, NOW)

    assert record.applied_revision == "1.4.0"
    assert record.attempted_revision == "1.4.0"

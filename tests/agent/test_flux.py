"""Flux objects to report records: what a user of the hub sees for each Flux state."""

import copy
from typing import Any

import pytest

from agent.report import ObjectRecord, Source
from agent.sources import flux
from tests.agent.examples import (
    DIGEST,
    EARLIER_AT,
    GIT_URL,
    LATER,
    LATER_AT,
    NOW,
    SHA_A,
    SHA_B,
    condition,
    git_repository,
    helm_release_v2,
    helm_release_v2beta1,
    kustomization,
    oci_repository,
    snapshot,
    with_conditions,
)

# --- Kustomization -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "revision",
    [f"main@sha1:{SHA_A}", f"main/{SHA_A}"],
    ids=["v1-revision", "v1beta2-revision"],
)
def test_reconciled_kustomization_is_ready_and_healthy_at_its_revision(revision: str) -> None:
    record = flux.kustomization(kustomization(applied=revision), NOW)

    assert record == ObjectRecord(
        reconciler="flux",
        kind="Kustomization",
        namespace="flux-system",
        name="apps",
        source=Source(ref="GitRepository/flux-system/platform", path="./clusters/dev/apps"),
        applied_revision=revision,
        attempted_revision=revision,
        ready=True,
        reason="ReconciliationSucceeded",
        message=f"Applied revision: {revision}",
        health="Healthy",
        last_transition_at=EARLIER_AT,
    )


def test_failing_kustomization_keeps_applied_revision_and_reports_the_attempt() -> None:
    obj = with_conditions(
        kustomization(applied=f"main@sha1:{SHA_A}", attempted=f"main@sha1:{SHA_B}"),
        condition(
            "Ready",
            "False",
            "HealthCheckFailed",
            "timeout waiting for: [Deployment/apps/web status: 'InProgress']",
            since=LATER,
        ),
    )

    record = flux.kustomization(obj, NOW)

    assert record.applied_revision == f"main@sha1:{SHA_A}"
    assert record.attempted_revision == f"main@sha1:{SHA_B}"
    assert record.ready is False
    assert record.reason == "HealthCheckFailed"
    assert record.message is not None
    assert "Deployment/apps/web" in record.message
    assert record.health == "Degraded"
    assert record.last_transition_at == LATER_AT


def test_progressing_kustomization_is_not_settled() -> None:
    obj = with_conditions(
        kustomization(),
        condition("Reconciling", "True", "Progressing", "Reconciliation in progress"),
        condition("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
    )

    record = flux.kustomization(obj, NOW)

    assert record.ready is None
    assert record.reason == "Progressing"
    assert record.health == "Progressing"


@pytest.mark.parametrize("ready", ["False", "Unknown"])
def test_stalled_kustomization_is_degraded_whatever_ready_says(ready: str) -> None:
    obj = with_conditions(
        kustomization(),
        condition("Stalled", "True", "InvalidPath", "path './clusters/dev/apps' not found"),
        condition("Reconciling", "True", "Progressing", "Reconciliation in progress"),
        condition("Ready", ready, "InvalidPath", "path './clusters/dev/apps' not found"),
    )

    record = flux.kustomization(obj, NOW)

    assert record.ready is {"False": False, "Unknown": None}[ready]
    assert record.reason == "InvalidPath"
    assert record.health == "Degraded"


def test_retrying_kustomization_stays_degraded_while_ready_is_unknown() -> None:
    obj = with_conditions(
        kustomization(),
        condition("Reconciling", "True", "ProgressingWithRetry", "retrying"),
        condition("Ready", "Unknown", "Progressing", "Reconciliation in progress"),
        condition("Healthy", "False", "HealthCheckFailed", "Deployment/apps/web not ready"),
    )

    record = flux.kustomization(obj, NOW)

    assert record.ready is None
    assert record.health == "Degraded"


def test_suspended_kustomization_is_flagged_and_keeps_its_last_state() -> None:
    obj = kustomization()
    obj["spec"]["suspend"] = True

    record = flux.kustomization(obj, NOW)

    assert record.suspended is True
    assert record.ready is True


def test_kustomization_following_a_source_in_another_namespace_names_it() -> None:
    obj = kustomization()
    obj["spec"]["sourceRef"] = {"kind": "OCIRepository", "name": "apps", "namespace": "shared"}

    record = flux.kustomization(obj, NOW)

    assert record.source == Source(ref="OCIRepository/shared/apps", path="./clusters/dev/apps")


def test_new_kustomization_without_status_is_unknown() -> None:
    obj = kustomization()
    del obj["status"]

    record = flux.kustomization(obj, NOW)

    assert record.ready is None
    assert record.reason == "StatusMissing"
    assert record.health == "Unknown"
    assert record.applied_revision is None


def test_status_without_ready_condition_is_unknown_and_says_so() -> None:
    obj = with_conditions(kustomization(), condition("Reconciling", "True", "Progressing"))

    record = flux.kustomization(obj, NOW)

    assert record.ready is None
    assert record.reason == "ReadyConditionMissing"
    assert record.health == "Progressing"


def test_transition_time_ahead_of_the_agent_clock_is_clamped_to_now() -> None:
    obj = with_conditions(
        kustomization(),
        condition("Ready", "True", "ReconciliationSucceeded", since="2031-01-01T00:00:00Z"),
    )

    assert flux.kustomization(obj, NOW).last_transition_at == NOW


# --- HelmRelease ---------------------------------------------------------------------------


def test_deployed_helm_release_reports_chart_version_of_newest_history_entry() -> None:
    record = flux.helm_release(helm_release_v2(), NOW)

    assert record.kind == "HelmRelease"
    assert (record.namespace, record.name) == ("podinfo", "podinfo")
    assert record.applied_revision == "6.5.4"
    assert record.attempted_revision == "6.5.4"
    assert record.ready is True
    assert record.reason == "UpgradeSucceeded"
    assert record.health == "Healthy"
    assert record.source == Source(ref="HelmRepository/podinfo/podinfo", path="podinfo")
    assert record.drifted is False


def test_app_version_of_the_running_release_is_added_to_the_message() -> None:
    obj = helm_release_v2(snapshot(2, "6.5.4", "deployed", app_version="6.5.4-app"))

    record = flux.helm_release(obj, NOW)

    assert record.applied_revision == "6.5.4"
    assert record.message is not None
    assert record.message.startswith("Helm upgrade succeeded")
    assert record.message.endswith("(app version 6.5.4-app)")


def test_rolled_back_helm_release_runs_the_old_chart_and_attempted_the_new() -> None:
    obj = helm_release_v2(
        snapshot(3, "6.5.3", "deployed"),
        snapshot(2, "6.5.4", "failed"),
        snapshot(1, "6.5.3", "superseded"),
        attempted="6.5.4",
    )
    obj = with_conditions(
        obj,
        condition(
            "Ready", "False", "RollbackSucceeded", "Helm rollback to previous release succeeded"
        ),
        condition("Released", "False", "UpgradeFailed", "Helm upgrade failed: timed out"),
        condition("Remediated", "True", "RollbackSucceeded", "Helm rollback succeeded"),
    )

    record = flux.helm_release(obj, NOW)

    assert record.applied_revision == "6.5.3"
    assert record.attempted_revision == "6.5.4"
    assert record.ready is False
    assert record.health == "Degraded"


def test_failed_upgrade_leaves_the_previous_release_running() -> None:
    obj = helm_release_v2(
        snapshot(2, "6.5.4", "failed"), snapshot(1, "6.5.3", "superseded"), attempted="6.5.4"
    )
    obj = with_conditions(obj, condition("Ready", "False", "UpgradeFailed", "Helm upgrade failed"))

    record = flux.helm_release(obj, NOW)

    assert record.applied_revision == "6.5.3"
    assert record.attempted_revision == "6.5.4"
    assert record.ready is False
    assert record.reason == "UpgradeFailed"


@pytest.mark.parametrize("status", ["failed", "uninstalled", "pending-install"])
def test_helm_release_with_nothing_running_has_no_applied_revision(status: str) -> None:
    obj = helm_release_v2(snapshot(1, "6.5.4", status))

    assert flux.helm_release(obj, NOW).applied_revision is None


def test_drifted_condition_marks_helm_release_drifted() -> None:
    obj = helm_release_v2()
    obj["status"]["conditions"].append(
        condition("Drifted", "True", "DriftDetected", "Deployment/podinfo/podinfo changed")
    )

    record = flux.helm_release(obj, NOW)

    assert record.drifted is True
    assert record.ready is True


def test_no_drift_condition_keeps_helm_release_undrifted() -> None:
    obj = helm_release_v2()
    obj["status"]["conditions"].append(
        condition(
            "Drifted", "False", "NoDriftDetected", "No drift detected against the cluster state."
        )
    )

    assert flux.helm_release(obj, NOW).drifted is False


def test_helm_release_from_oci_chart_ref_names_the_oci_repository() -> None:
    obj = helm_release_v2(
        snapshot(2, "6.5.4+9f86d081884c", "deployed"),
        attempted="6.5.4+9f86d081884c",
        chart_ref=True,
    )

    record = flux.helm_release(obj, NOW)

    assert record.source == Source(ref="OCIRepository/flux-system/podinfo")
    assert record.applied_revision == record.attempted_revision == "6.5.4+9f86d081884c"


def test_v2beta1_helm_release_reads_last_applied_revision() -> None:
    record = flux.helm_release(helm_release_v2beta1(applied="6.5.3", attempted="6.5.4"), NOW)

    assert record.applied_revision == "6.5.3"
    assert record.attempted_revision == "6.5.4"
    assert record.ready is True
    assert record.source == Source(ref="GitRepository/flux-system/podinfo", path="./charts/podinfo")


def failed_tests_release(test: dict[str, object], **remediation: object) -> dict[str, Any]:
    """A released HelmRelease whose Helm tests failed, with `spec.test` as given."""
    obj = helm_release_v2()
    obj["spec"]["test"] = test
    if remediation:
        obj["spec"]["upgrade"] = {"remediation": remediation}
    counted = test.get("enable") and not test.get("ignoreFailures")
    ready = (
        condition("Ready", "False", "TestFailed", "Helm test failed for release podinfo/podinfo.v2")
        if counted
        else condition("Ready", "True", "UpgradeSucceeded", "Helm upgrade succeeded")
    )
    return with_conditions(
        obj,
        ready,
        condition("Released", "True", "UpgradeSucceeded", "Helm upgrade succeeded"),
        condition("TestSuccess", "False", "TestFailed", "Helm test failed: pod podinfo-test"),
    )


@pytest.mark.parametrize(
    "test",
    [{"enable": True, "ignoreFailures": True}, {"enable": False}, {}],
    ids=["failures-ignored", "tests-disabled", "tests-unset"],
)
def test_failed_helm_tests_that_do_not_count_towards_ready_leave_the_release_healthy(
    test: dict[str, object],
) -> None:
    record = flux.helm_release(failed_tests_release(test), NOW)

    assert record.ready is True
    assert record.health == "Healthy"


def test_failed_helm_tests_that_count_degrade_the_release_even_while_it_retries() -> None:
    # Failures ignored by the upgrade's remediation are not rolled back, but still fail Ready.
    obj = failed_tests_release({"enable": True}, ignoreTestFailures=True)
    obj["status"]["conditions"][0] = condition("Ready", "Unknown", "Progressing", "retrying")

    record = flux.helm_release(obj, NOW)

    assert record.ready is None
    assert record.health == "Degraded"


def test_suspended_helm_release_is_flagged() -> None:
    obj = helm_release_v2()
    obj["spec"]["suspend"] = True

    assert flux.helm_release(obj, NOW).suspended is True


# --- GitRepository and OCIRepository -------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ({"branch": "main"}, "main"),
        ({"tag": "v1.2.0"}, "refs/tags/v1.2.0"),
        ({"semver": ">=1.0.0 <2.0.0"}, "semver:>=1.0.0 <2.0.0"),
        ({"name": "refs/pull/42/head"}, "refs/pull/42/head"),
        ({"branch": "main", "commit": SHA_B}, SHA_B),
        ({"branch": "main", "tag": "v1.2.0"}, "refs/tags/v1.2.0"),
    ],
    ids=["branch", "tag", "semver", "name", "commit-wins", "tag-over-branch"],
)
def test_git_repository_ref_follows_flux_precedence(ref: dict[str, str], expected: str) -> None:
    record = flux.git_repository(git_repository(ref), NOW)

    assert record.source == Source(url=GIT_URL, ref=expected)


@pytest.mark.parametrize("revision", [f"main@sha1:{SHA_B}", f"main/{SHA_B}"], ids=["v1", "v1beta2"])
def test_git_repository_artifact_is_fetched_never_applied(revision: str) -> None:
    record = flux.git_repository(git_repository({"branch": "main"}, revision), NOW)

    assert record.attempted_revision == revision
    assert record.applied_revision is None
    assert record.ready is True
    assert record.health == "Healthy"


def test_git_repository_failing_to_fetch_keeps_its_last_artifact() -> None:
    obj = with_conditions(
        git_repository({"branch": "main"}),
        condition("FetchFailed", "True", "GitOperationFailed", "authentication required"),
        condition("Ready", "False", "GitOperationFailed", "authentication required"),
    )

    record = flux.git_repository(obj, NOW)

    assert record.ready is False
    assert record.reason == "GitOperationFailed"
    assert record.attempted_revision == f"main@sha1:{SHA_B}"


@pytest.mark.parametrize(
    ("ref", "revision", "expected_ref"),
    [
        ({"tag": "6.5.4"}, f"6.5.4@sha256:{DIGEST}", "6.5.4"),
        ({"semver": "6.5.x"}, f"6.5.4@sha256:{DIGEST}", "semver:6.5.x"),
        ({"digest": f"sha256:{DIGEST}"}, f"sha256:{DIGEST}", f"sha256:{DIGEST}"),
    ],
    ids=["tag", "semver", "digest"],
)
def test_oci_repository_reports_fetched_artifact_and_its_ref(
    ref: dict[str, str], revision: str, expected_ref: str
) -> None:
    record = flux.oci_repository(oci_repository(ref, revision), NOW)

    assert record.kind == "OCIRepository"
    assert record.source == Source(url="oci://ghcr.io/contoso/manifests/podinfo", ref=expected_ref)
    assert record.attempted_revision == revision
    assert record.applied_revision is None


# --- linking sources -----------------------------------------------------------------------


def test_kustomization_gets_the_url_and_ref_of_the_git_repository_it_follows() -> None:
    repo = flux.git_repository(git_repository({"branch": "main"}), NOW)
    apps = flux.kustomization(kustomization(), NOW)
    other = flux.kustomization(
        {
            **copy.deepcopy(kustomization()),
            "metadata": {"name": "infra", "namespace": "flux-system"},
        }
        | {"spec": {"sourceRef": {"kind": "GitRepository", "name": "elsewhere"}}},
        NOW,
    )

    linked = flux.link_sources([apps, repo, other])

    assert [item.name for item in linked] == ["apps", "platform", "infra"]
    assert linked[0].source == Source(
        url=GIT_URL,
        ref="GitRepository/flux-system/platform",
        path="./clusters/dev/apps",
        url_ref="main",
    )
    assert linked[1] == repo
    assert linked[2].source == Source(ref="GitRepository/flux-system/elsewhere")

"""Reconciler objects as the Kubernetes API returns them, written from the Flux and Argo CD API
references: the inputs of the agent's mapper tests. Each builder gives a healthy object;
`with_conditions` and plain dict edits turn it into the failing, progressing or odd ones."""

import copy
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
EARLIER = "2026-11-22T11:00:00Z"
EARLIER_AT = datetime(2026, 11, 22, 11, 0, tzinfo=UTC)
LATER = "2026-11-22T11:30:00Z"
LATER_AT = datetime(2026, 11, 22, 11, 30, tzinfo=UTC)

SHA_A = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c"
SHA_B = "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3"
SHA_C = "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"
DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
GIT_URL = "https://github.com/contoso/platform-gitops"
APP_REPO = "https://github.com/argoproj/argocd-example-apps.git"
CHART_REPO = "https://charts.contoso.example"
VALUES_REPO = "https://github.com/contoso/values.git"


def condition(
    kind: str, status: str, reason: str, message: str = "", since: str = EARLIER
) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": 2,
    }


def ready(message: str = "Applied revision", reason: str = "ReconciliationSucceeded") -> Any:
    return [condition("Ready", "True", reason, message)]


def with_conditions(obj: dict[str, Any], *conditions: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    changed["status"]["conditions"] = list(conditions)
    return changed


def metadata(name: str, namespace: str = "flux-system") -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "generation": 2,
        "uid": "8a1b5c2e-7f0d-4c55-9a51-1d5b2f3c4d6e",
        "resourceVersion": "48213",
        "creationTimestamp": "2026-11-01T08:00:00Z",
    }


# --- Flux ----------------------------------------------------------------------------------


def kustomization(
    *, applied: str | None = f"main@sha1:{SHA_A}", attempted: str | None = None
) -> dict[str, Any]:
    """kustomize.toolkit.fluxcd.io/v1, reconciled; `main/<sha>` revisions make it v1beta2."""
    attempted = attempted or applied
    status: dict[str, Any] = {
        "observedGeneration": 2,
        "lastHandledReconcileAt": "2026-11-22T10:59:00Z",
        "conditions": ready(f"Applied revision: {applied}"),
        "inventory": {"entries": [{"id": "apps_web_apps_Deployment", "v": "v1"}]},
    }
    if applied:
        status["lastAppliedRevision"] = applied
    if attempted:
        status["lastAttemptedRevision"] = attempted
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": metadata("apps"),
        "spec": {
            "interval": "10m",
            "path": "./clusters/dev/apps",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "platform"},
            "targetNamespace": "apps",
        },
        "status": status,
    }


def snapshot(
    version: int, chart_version: str, status: str, app_version: str | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "podinfo",
        "namespace": "podinfo",
        "version": version,
        "status": status,
        "chartName": "podinfo",
        "chartVersion": chart_version,
        "configDigest": f"sha256:{DIGEST}",
        "digest": f"sha256:{DIGEST}",
        "firstDeployed": "2026-11-01T08:00:00Z",
        "lastDeployed": EARLIER,
    }
    if app_version is not None:
        entry["appVersion"] = app_version
    return entry


def helm_release_v2(
    *history: dict[str, Any], attempted: str = "6.5.4", chart_ref: bool = False
) -> dict[str, Any]:
    """helm.toolkit.fluxcd.io/v2 (v2beta2 has the same status); history is newest first."""
    spec: dict[str, Any] = {"interval": "10m", "releaseName": "podinfo", "values": {"replicas": 2}}
    if chart_ref:
        spec["chartRef"] = {"kind": "OCIRepository", "name": "podinfo", "namespace": "flux-system"}
    else:
        spec["chart"] = {
            "spec": {
                "chart": "podinfo",
                "version": "6.5.*",
                "sourceRef": {"kind": "HelmRepository", "name": "podinfo"},
            }
        }
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": metadata("podinfo", "podinfo"),
        "spec": spec,
        "status": {
            "observedGeneration": 2,
            "conditions": [
                condition(
                    "Ready",
                    "True",
                    "UpgradeSucceeded",
                    "Helm upgrade succeeded for release podinfo/podinfo.v2 with chart "
                    "podinfo@6.5.4",
                ),
                condition("Released", "True", "UpgradeSucceeded", "Helm upgrade succeeded"),
            ],
            "helmChart": "flux-system/podinfo-podinfo",
            "storageNamespace": "podinfo",
            "history": list(history)
            or [snapshot(2, "6.5.4", "deployed"), snapshot(1, "6.5.3", "superseded")],
            "lastAttemptedReleaseAction": "upgrade",
            "lastAttemptedRevision": attempted,
            "lastAttemptedConfigDigest": f"sha256:{DIGEST}",
            "lastAttemptedGeneration": 2,
        },
    }


def helm_release_v2beta1(*, applied: str = "6.5.3", attempted: str = "6.5.4") -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2beta1",
        "kind": "HelmRelease",
        "metadata": metadata("podinfo", "podinfo"),
        "spec": {
            "interval": "10m",
            "chart": {
                "spec": {
                    "chart": "./charts/podinfo",
                    "sourceRef": {
                        "kind": "GitRepository",
                        "name": "podinfo",
                        "namespace": "flux-system",
                    },
                }
            },
        },
        "status": {
            "observedGeneration": 2,
            "conditions": [
                condition(
                    "Ready", "True", "ReconciliationSucceeded", "Release reconciliation succeeded"
                ),
                condition("Released", "True", "UpgradeSucceeded", "Helm upgrade succeeded"),
            ],
            "helmChart": "flux-system/podinfo-podinfo",
            "lastAppliedRevision": applied,
            "lastAttemptedRevision": attempted,
            "lastAttemptedValuesChecksum": "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "lastReleaseRevision": 3,
        },
    }


def git_repository(ref: dict[str, str], revision: str = f"main@sha1:{SHA_B}") -> dict[str, Any]:
    """source.toolkit.fluxcd.io/v1; a `main/<sha>` revision makes it v1beta2."""
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": metadata("platform"),
        "spec": {"interval": "1m", "url": GIT_URL, "ref": ref},
        "status": {
            "observedGeneration": 2,
            "artifact": {
                "digest": f"sha256:{DIGEST}",
                "lastUpdateTime": EARLIER,
                "path": "gitrepository/flux-system/platform/latest.tar.gz",
                "revision": revision,
                "size": 4096,
                "url": "http://source-controller.flux-system.svc/latest.tar.gz",
            },
            "conditions": [
                condition(
                    "Ready", "True", "Succeeded", f"stored artifact for revision '{revision}'"
                ),
                condition("ArtifactInStorage", "True", "Succeeded", "stored artifact"),
            ],
        },
    }


def oci_repository(ref: dict[str, str], revision: str) -> dict[str, Any]:
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1beta2",
        "kind": "OCIRepository",
        "metadata": metadata("manifests"),
        "spec": {
            "interval": "5m",
            "url": "oci://ghcr.io/contoso/manifests/podinfo",
            "ref": ref,
        },
        "status": {
            "observedGeneration": 2,
            "url": "http://source-controller.flux-system.svc/ocirepository/latest.tar.gz",
            "artifact": {"revision": revision, "digest": f"sha256:{DIGEST}"},
            "conditions": ready(f"stored artifact for digest '{revision}'", "Succeeded"),
        },
    }


# --- Argo CD -------------------------------------------------------------------------------


def history_entry(revision: str, entry_id: int, deployed_at: str = EARLIER) -> dict[str, Any]:
    return {
        "id": entry_id,
        "revision": revision,
        "deployedAt": deployed_at,
        "deployStartedAt": deployed_at,
        "source": {"repoURL": APP_REPO, "path": "guestbook", "targetRevision": "HEAD"},
        "initiatedBy": {"automated": True},
    }


def application(
    *,
    applied: str = SHA_A,
    compared: str | None = None,
    sync: str = "Synced",
    health: str = "Healthy",
) -> dict[str, Any]:
    """argoproj.io/v1alpha1, single source, last synced by an automated sync of `applied`."""
    source = {"repoURL": APP_REPO, "path": "guestbook", "targetRevision": "HEAD"}
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": metadata("guestbook", "argocd"),
        "spec": {
            "project": "default",
            "source": source,
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": False}},
        },
        "status": {
            "sync": {
                "status": sync,
                "revision": compared or applied,
                "comparedTo": {"source": source, "destination": {"namespace": "guestbook"}},
            },
            "health": {"status": health, "lastTransitionTime": EARLIER},
            "history": [history_entry(SHA_C, 1, "2026-11-21T09:00:00Z"), history_entry(applied, 2)],
            "operationState": {
                "operation": {"sync": {"revision": applied}, "initiatedBy": {"automated": True}},
                "phase": "Succeeded",
                "message": "successfully synced (all tasks run)",
                "startedAt": "2026-11-22T10:59:30Z",
                "finishedAt": EARLIER,
                "syncResult": {"revision": applied, "source": source, "resources": []},
            },
            "reconciledAt": "2026-11-22T11:55:00Z",
            "sourceType": "Directory",
            "summary": {"images": ["gcr.io/heptio-images/ks-guestbook-demo:0.2"]},
        },
    }


def multi_source_application(
    *, applied: list[str], compared: list[str], sync: str = "Synced", values_first: bool = False
) -> dict[str, Any]:
    """A chart from a Helm repository with values files from a Git repository (`ref`)."""
    chart = {
        "repoURL": CHART_REPO,
        "chart": "web",
        "targetRevision": "1.4.0",
        "helm": {"valueFiles": ["$values/env/dev/values.yaml"]},
    }
    values = {"repoURL": VALUES_REPO, "targetRevision": "main", "ref": "values"}
    sources = [values, chart] if values_first else [chart, values]
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": metadata("web", "argocd"),
        "spec": {
            "project": "default",
            "sources": sources,
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "web"},
        },
        "status": {
            "sync": {"status": sync, "revisions": compared, "comparedTo": {"sources": sources}},
            "health": {"status": "Healthy", "lastTransitionTime": EARLIER},
            "history": [
                {
                    "id": 4,
                    "revisions": applied,
                    "sources": sources,
                    "deployedAt": EARLIER,
                    "deployStartedAt": EARLIER,
                }
            ],
            "operationState": {
                "operation": {"sync": {"revisions": applied}},
                "phase": "Succeeded",
                "message": "successfully synced (all tasks run)",
                "startedAt": EARLIER,
                "finishedAt": EARLIER,
                "syncResult": {"revisions": applied, "sources": sources, "resources": []},
            },
            "sourceTypes": ["Helm", "Helm"],
        },
    }

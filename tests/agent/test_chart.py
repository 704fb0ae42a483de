"""The agent's Helm chart, rendered by Helm's own SDK with each set of CI values: a
locked-down DaemonSet that passes every setting a pod needs, read-only RBAC on exactly the
watched kinds, and clear refusals of values that cannot work. (Lint and the Kubernetes
schemas: tests/deploy/test_charts_valid.py.)"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.settings import AgentSettings
from agent.sources import WATCHED_KINDS
from tests.deploy import charts
from tests.deploy.charts import helm

CHART = charts.CHARTS / "fleetmark-agent"
CI_VALUES = charts.ci_values(CHART)
# Settings for running outside a cluster (a state file, a kubeconfig or a bare API host);
# the chart passes every other one.
NOT_IN_A_POD = {"state_file", "state_file_max_age", "kubeconfig", "kube_context", "kube_host"}


def values(name: str) -> dict[str, Any]:
    return charts.load_values(CHART / "ci" / name)


def render(chart_values: dict[str, Any]) -> list[dict[str, Any]]:
    return charts.render(CHART, chart_values)


def only(documents: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (doc for doc in documents if doc["kind"] == kind)


def agent_container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = only(documents, "DaemonSet")
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def test_the_daemonset_runs_the_agent_locked_down() -> None:
    documents = render(values("default-values.yaml"))
    (daemonset,) = only(documents, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    container = agent_container(documents)

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {item["name"]: item.get("value") for item in container["env"]}
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert mounts["spool"] == env["FLEETMARK_AGENT_SPOOL_DIR"]
    assert mounts["token"] == str(Path(env["FLEETMARK_AGENT_TOKEN_FILE"]).parent)
    assert pod["serviceAccountName"] == "fleetmark-agent"


@pytest.mark.parametrize("path", CI_VALUES, ids=lambda path: path.name)
def test_the_daemonset_passes_every_setting_a_pod_needs(path: Path) -> None:
    container = agent_container(render(yaml.safe_load(path.read_text())))
    passed = {
        item["name"].removeprefix("FLEETMARK_AGENT_").lower()
        for item in container["env"]
        if item["name"].startswith("FLEETMARK_AGENT_")
    }
    fields = set(AgentSettings.model_fields)

    assert passed <= fields, f"not settings: {passed - fields}"
    optional = {"hub_ca_file", "environment", "cluster_type"}  # passed only when given
    assert fields - passed - NOT_IN_A_POD - optional == set()


@pytest.mark.parametrize("path", CI_VALUES, ids=lambda path: path.name)
def test_the_settings_the_chart_passes_are_accepted_by_the_agent(path: Path) -> None:
    container = agent_container(render(yaml.safe_load(path.read_text())))
    given = {
        item["name"].removeprefix("FLEETMARK_AGENT_").lower(): item["value"]
        for item in container["env"]
        if item["name"].startswith("FLEETMARK_AGENT_") and "value" in item
    }

    AgentSettings(**given)  # raises when, say, the hub timeout outlasts the renew deadline


def test_given_values_reach_the_agent() -> None:
    env = {
        item["name"]: item.get("value")
        for item in agent_container(render(values("namespaced-values.yaml")))["env"]
    }

    assert env["FLEETMARK_AGENT_CLUSTER_NAME"] == "large-dev-1"
    assert (env["FLEETMARK_AGENT_ENVIRONMENT"], env["FLEETMARK_AGENT_CLUSTER_TYPE"]) == (
        "dev",
        "large",
    )
    assert env["FLEETMARK_AGENT_NAMESPACES"] == "flux-system,argocd"
    assert env["FLEETMARK_AGENT_KINDS"] == "Kustomization,Application"
    assert env["FLEETMARK_AGENT_LEADER_ELECTION"] == "false"
    assert env["FLEETMARK_AGENT_HUB_CA_FILE"] is not None


def test_rbac_grants_only_reads_on_every_watched_kind_across_the_cluster() -> None:
    documents = render(values("default-values.yaml"))
    (role,) = only(documents, "ClusterRole")

    granted = {
        (group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert {tuple(rule["verbs"]) for rule in role["rules"]} == {("get", "list", "watch")}
    assert granted == {(kind.group, kind.plural) for kind in WATCHED_KINDS}
    (lease_role,) = only(documents, "Role")
    assert lease_role["metadata"]["namespace"] == "fleetmark"
    assert {(tuple(rule["resources"]), tuple(rule["verbs"])) for rule in lease_role["rules"]} == {
        (("leases",), ("create",)),
        (("leases",), ("get", "update")),
    }


def test_a_namespaced_agent_reads_only_its_kinds_in_its_namespaces() -> None:
    documents = render(values("namespaced-values.yaml"))

    assert list(only(documents, "ClusterRole")) == []
    roles = [doc for doc in only(documents, "Role") if doc["metadata"]["name"].endswith("-watch")]
    assert sorted(role["metadata"]["namespace"] for role in roles) == ["argocd", "flux-system"]
    for role in roles:
        assert {(rule["apiGroups"][0], rule["resources"][0]) for rule in role["rules"]} == {
            ("kustomize.toolkit.fluxcd.io", "kustomizations"),
            ("argoproj.io", "applications"),
        }
    # Leader election is off: no Lease role at all.
    assert [doc for doc in only(documents, "Role") if "lease" in doc["metadata"]["name"]] == []


def test_an_existing_secret_is_used_instead_of_a_new_one() -> None:
    documents = render(values("namespaced-values.yaml"))
    (daemonset,) = only(documents, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}

    assert list(only(documents, "Secret")) == []
    assert volumes["token"]["secret"]["secretName"] == "fleetmark-agent-token"


def test_a_value_the_agent_needs_is_required_by_name() -> None:
    without_url = values("default-values.yaml")
    del without_url["hub"]

    with pytest.raises(helm.HelmRenderError, match=r"hub\.url is required"):
        render(without_url)


def test_the_schema_refuses_a_kind_the_agent_cannot_watch() -> None:
    wrong = values("default-values.yaml") | {"watch": {"kinds": ["Deployment"]}}

    with pytest.raises(helm.HelmValuesError, match=r"/watch/kinds/0"):
        render(wrong)


def hostpath_pod(**pod_security: int) -> dict[str, Any]:
    chart_values = values("namespaced-values.yaml")
    chart_values["podSecurityContext"] = {"runAsNonRoot": True, **pod_security}
    (daemonset,) = only(render(chart_values), "DaemonSet")
    pod: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return pod


def test_a_hostpath_spool_is_handed_to_the_agent_by_an_init_container_with_chown_alone() -> None:
    pod = hostpath_pod(runAsUser=65532, runAsGroup=65532)
    (init,) = pod["initContainers"]
    (agent,) = pod["containers"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    spool_dir = next(m["mountPath"] for m in agent["volumeMounts"] if m["name"] == "spool")

    assert volumes["spool"]["hostPath"] == {
        "path": "/var/lib/fleetmark-agent/spool",
        "type": "DirectoryOrCreate",
    }
    assert init["volumeMounts"] == [{"name": "spool", "mountPath": spool_dir}]
    assert init["securityContext"] == {
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
    }
    assert init["command"][-3:] == [spool_dir, "65532", "65532"]
    # The agent itself stays non-root and locked down.
    assert agent["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_init_container_command_hands_a_fresh_folder_to_the_agents_user(
    tmp_path: Path,
) -> None:
    # As root here, the folder goes to the chart's user; otherwise to this test's own.
    user, group = (65532, 65532) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    (init,) = hostpath_pod(runAsUser=user, runAsGroup=group)["initContainers"]
    program, *arguments = init["command"]
    folder = tmp_path / "spool"
    folder.mkdir()  # as the kubelet's DirectoryOrCreate leaves it: the kubelet's own

    assert program == "python3"
    subprocess.run([sys.executable, *arguments[:-3], str(folder), *arguments[-2:]], check=True)

    assert (folder.stat().st_uid, folder.stat().st_gid) == (user, group)


def test_an_emptydir_spool_needs_no_init_container() -> None:
    (daemonset,) = only(render(values("default-values.yaml")), "DaemonSet")

    assert "initContainers" not in daemonset["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/spool",
        "/var/lib/../../etc",
        "var/lib/spool",
        "/etc/cron.d",
        "/var/lib/kubelet",
        "/var/lib/fleetmark-agent/../kubelet",
        "/var/lib/fleetmark-agent/spool/../../kubelet",
        "/var/lib/fleetmark-agent-other",
        "/var/lib/fleetmark-agent/",
    ],
)
def test_the_schema_refuses_a_hostpath_spool_outside_the_agents_folder(path: str) -> None:
    # The init container, as root, hands the folder to the agent's user.
    wrong = values("namespaced-values.yaml")
    wrong["spool"]["hostPath"] = {"path": path}

    with pytest.raises(helm.HelmValuesError, match=r"/spool/hostPath/path"):
        render(wrong)


@pytest.mark.parametrize(
    "path",
    ["/var/lib/fleetmark-agent", "/var/lib/fleetmark-agent/spool", "/var/lib/fleetmark-agent/a/b"],
)
def test_the_schema_takes_a_hostpath_spool_in_the_agents_folder(path: str) -> None:
    chart_values = values("namespaced-values.yaml")
    chart_values["spool"]["hostPath"] = {"path": path}
    chart_values["podSecurityContext"] = {"runAsNonRoot": True, "runAsUser": 1, "runAsGroup": 1}

    (daemonset,) = only(render(chart_values), "DaemonSet")

    volumes = {v["name"]: v for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    assert volumes["spool"]["hostPath"]["path"] == path

"""The hub's Helm chart, rendered by Helm's own SDK: locked-down replicas of `fleetmark serve`
on a schema the migration hook upgraded first, every setting one the hub accepts, the
repositories file and git credentials where the file says they are, the first admin token from
the Secret (made by the chart when none is given, and kept by an upgrade), and the dashboards
as ConfigMaps equal to the built ones."""

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dashboards import build
from hub.harvest.config import parse_repositories
from hub.health.router import router as health_router
from hub.security import API_TOKEN_FORMAT
from hub.settings import HubSettings
from tests.deploy import charts
from tests.deploy.charts import helm

CHART = charts.CHARTS / "fleetmark-hub"
DEFAULTS = CHART / "ci" / "default-values.yaml"
EVERYTHING = CHART / "ci" / "all-options-values.yaml"


def only(documents: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents if doc["kind"] == kind]


def named(documents: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [doc for doc in documents if doc["metadata"]["name"] == name]


def pod_of(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (workload,) = only(documents, kind)
    pod: dict[str, Any] = workload["spec"]["template"]["spec"]
    return pod


def settings_map(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The ConfigMap of settings and the repositories file."""
    (config,) = (d for d in only(documents, "ConfigMap") if d["metadata"]["name"] == CHART.name)
    return config


def env_of(container: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The container's variables: values as given, those from the ConfigMap resolved."""
    config = settings_map(documents)
    env: dict[str, Any] = {}
    for item in container["env"]:
        source = item.get("valueFrom", {})
        if "configMapKeyRef" in source:
            env[item["name"]] = config["data"][source["configMapKeyRef"]["key"]]
        else:
            env[item["name"]] = item.get("value", source)
    return env


def mounted_file(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[str, str]:
    """(volume, key) that `path` in the container comes from."""
    for mount in container["volumeMounts"]:
        folder = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(folder):
            (volume,) = (v for v in pod["volumes"] if v["name"] == mount["name"])
            source = volume.get("secret") or volume.get("configMap")
            name = path.removeprefix(folder)
            items = {item["path"]: item["key"] for item in source.get("items", [])}
            return mount["name"], items.get(name, name)
    raise AssertionError(f"nothing is mounted at {path}")


def settings_from(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> HubSettings:
    """HubSettings as the hub reads them from the container's variables (the Secret's
    stand in for those from the Secret)."""
    for name in os.environ:
        if name.startswith("FLEETMARK_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("FLEETMARK_") and isinstance(value, str):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("FLEETMARK_TOKEN_SECRET", "x" * 32)
    if "FLEETMARK_METRICS_TOKEN_FILE" in env:  # mounted from its Secret
        monkeypatch.delenv("FLEETMARK_METRICS_TOKEN_FILE")
        monkeypatch.setenv("FLEETMARK_METRICS_TOKEN", "m" * 32)
    monkeypatch.setenv("FLEETMARK_DATABASE_URL", "postgresql://fleetmark@db.example.com/fleetmark")
    return HubSettings()


@pytest.mark.parametrize("path", [DEFAULTS, EVERYTHING], ids=lambda path: path.stem)
def test_the_hub_runs_locked_down_on_probes_the_hub_serves(path: Path) -> None:
    documents = charts.render(CHART, charts.load_values(path))
    pod = pod_of(documents, "Deployment")
    (hub,) = pod["containers"]
    served = {route.path for route in health_router.routes}

    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    assert hub["securityContext"]["readOnlyRootFilesystem"] is True
    assert hub["securityContext"]["allowPrivilegeEscalation"] is False
    assert hub["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert set(hub["resources"]) == {"requests", "limits"}
    probes = {hub[probe]["httpGet"]["path"] for probe in ("startupProbe", "livenessProbe")}
    assert probes == {"/healthz"}
    assert hub["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"/healthz", "/readyz"} <= served
    # Everything the hub writes is a volume of its own: /tmp, HOME, the data folder.
    env = env_of(hub, documents)
    mounts = {mount["mountPath"] for mount in hub["volumeMounts"]}
    assert {"/tmp", "/home/fleetmark", env["FLEETMARK_DATA_DIR"]} <= mounts


def test_more_than_one_replica_with_a_disruption_budget() -> None:
    documents = charts.render(CHART, charts.load_values(EVERYTHING))
    (deployment,) = only(documents, "Deployment")
    (budget,) = only(documents, "PodDisruptionBudget")

    assert deployment["spec"]["replicas"] == 3
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )


@pytest.mark.parametrize("path", [DEFAULTS, EVERYTHING], ids=lambda path: path.stem)
def test_every_setting_the_chart_passes_is_one_the_hub_accepts(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = charts.render(CHART, charts.load_values(path))
    (hub,) = pod_of(documents, "Deployment")["containers"]
    env = env_of(hub, documents)
    given = {name.removeprefix("FLEETMARK_").lower() for name in env if "FLEETMARK_" in name}

    # The admin token file is read by the hub at start, not a setting of its own.
    assert given - {"admin_token_file"} <= set(HubSettings.model_fields)
    settings = settings_from(env, monkeypatch)
    assert settings.mode == "production"
    assert settings.host == "0.0.0.0"  # a pod listens on its own address


def test_given_settings_reach_the_hub_as_it_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    documents = charts.render(CHART, charts.load_values(EVERYTHING))
    (hub,) = pod_of(documents, "Deployment")["containers"]

    settings = settings_from(env_of(hub, documents), monkeypatch)

    assert settings.harvest_interval.total_seconds() == 120
    assert settings.harvest_max_file_bytes == 2097152
    assert settings.schedule_environments == ["dev", "stage"]
    assert settings.schedule_mode == "branch"
    assert settings.discovery_allowed_urls == ["github.com"]
    assert settings.history_retention.days == 200
    assert settings.metrics_per_cluster is True


def test_the_repositories_file_and_its_git_credentials_are_where_the_hub_looks() -> None:
    documents = charts.render(CHART, charts.load_values(EVERYTHING))
    pod = pod_of(documents, "Deployment")
    (hub,) = pod["containers"]
    env = env_of(hub, documents)
    config = settings_map(documents)

    volume, key = mounted_file(pod, hub, env["FLEETMARK_REPOSITORIES_FILE"])
    repositories = parse_repositories(config["data"][key], key)
    assert volume == "config"
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    # ssh refuses a key its own user owns that others may read: root's, the group's to read.
    modes = {v["secret"].get("defaultMode") for v in pod["volumes"] if "secret" in v}
    assert (pod["securityContext"]["fsGroup"], modes) == (65532, {0o440})
    for repository in repositories.repositories:
        assert repository.credentials is not None
        file = repository.credentials.token_file or repository.credentials.ssh_key_file
        assert str(file).startswith(env["FLEETMARK_GIT_CREDENTIALS_DIR"] + "/")
        volume, _ = mounted_file(pod, hub, str(file))
        assert secrets[volume] in {"platform-gitops-git", "control-plane-git"}


@pytest.mark.parametrize("path", [DEFAULTS, EVERYTHING], ids=lambda path: path.stem)
def test_the_first_admin_token_is_the_secrets(path: Path) -> None:
    chart_values = charts.load_values(path)
    documents = charts.render(CHART, chart_values)
    pod = pod_of(documents, "Deployment")
    (hub,) = pod["containers"]
    env = env_of(hub, documents)

    volume, key = mounted_file(pod, hub, env["FLEETMARK_ADMIN_TOKEN_FILE"])
    (source,) = (v["secret"] for v in pod["volumes"] if v["name"] == volume)
    secret_name = chart_values["secret"].get("existingSecret") or "fleetmark-hub"
    assert (source["secretName"], key) == (secret_name, "admin-token")
    database = env["FLEETMARK_DATABASE_URL"]["secretKeyRef"]
    assert (database["name"], database["key"]) == (secret_name, "database-url")


def test_without_an_admin_token_the_hub_is_given_none() -> None:
    chart_values = charts.load_values(DEFAULTS) | {"adminToken": {"enabled": False}}
    documents = charts.render(CHART, chart_values)
    (hub,) = pod_of(documents, "Deployment")["containers"]
    (secret,) = named(only(documents, "Secret"), CHART.name)

    assert "FLEETMARK_ADMIN_TOKEN_FILE" not in env_of(hub, documents)
    assert set(secret["data"]) == {"database-url", "token-secret"}


def admin_token_of(documents: list[dict[str, Any]]) -> str:
    (secret,) = named(only(documents, "Secret"), CHART.name)
    return base64.b64decode(secret["data"]["admin-token"]).decode()


def test_without_an_admin_token_given_the_chart_makes_one_the_hub_accepts() -> None:
    chart_values = charts.load_values(DEFAULTS)

    first = admin_token_of(charts.render(CHART, chart_values))
    second = admin_token_of(charts.render(CHART, chart_values))

    assert API_TOKEN_FORMAT.fullmatch(first), first
    assert first != second


def test_an_upgrade_keeps_the_admin_token_the_chart_made() -> None:
    chart_values = charts.load_values(DEFAULTS)
    kept = "fma_" + "k" * 43
    made = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "fleetmark-hub", "namespace": charts.NAMESPACE},
        "data": {
            "database-url": base64.b64encode(b"postgresql://old@db/fleetmark").decode(),
            "admin-token": base64.b64encode(kept.encode()).decode(),
        },
    }
    elsewhere = made | {"metadata": {"name": "fleetmark-hub", "namespace": "other"}}

    upgraded = admin_token_of(charts.render_upgrade(CHART, chart_values, [made]))
    installed = admin_token_of(charts.render_upgrade(CHART, chart_values, [elsewhere]))

    assert upgraded == kept
    assert API_TOKEN_FORMAT.fullmatch(installed)
    assert installed != kept


def test_a_given_admin_token_wins_over_the_kept_one() -> None:
    chart_values = charts.load_values(DEFAULTS)
    given = chart_values["secret"]["adminToken"] = "fma_" + "g" * 43
    kept = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "fleetmark-hub", "namespace": charts.NAMESPACE},
        "data": {"admin-token": base64.b64encode(b"fma_" + b"k" * 43).decode()},
    }

    assert admin_token_of(charts.render_upgrade(CHART, chart_values, [kept])) == given


def test_an_existing_secret_is_used_instead_of_a_new_one() -> None:
    documents = charts.render(CHART, charts.load_values(EVERYTHING))

    assert only(documents, "Secret") == []


def test_the_schema_is_migrated_by_a_hook_before_the_hubs_start() -> None:
    documents = charts.render(CHART, charts.load_values(DEFAULTS))
    (job,) = only(documents, "Job")
    (secret,) = named(only(documents, "Secret"), CHART.name)
    (migrate,) = job["spec"]["template"]["spec"]["containers"]
    (hub,) = pod_of(documents, "Deployment")["containers"]
    hooks = job["metadata"]["annotations"]

    assert hooks["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert migrate["args"] == ["migrate"]
    assert hub["args"] == ["serve", "--no-migrate"]
    # The Secret the Job reads exists before it: a hook of lower weight.
    assert secret["metadata"]["annotations"]["helm.sh/hook"] == hooks["helm.sh/hook"]
    assert int(secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        hooks["helm.sh/hook-weight"]
    )
    database = {item["name"]: item for item in migrate["env"]}["FLEETMARK_DATABASE_URL"]
    assert database == {item["name"]: item for item in hub["env"]}["FLEETMARK_DATABASE_URL"]
    assert migrate["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_dashboards_are_configmaps_for_grafanas_sidecar_equal_to_the_built_ones() -> None:
    chart_values = charts.load_values(EVERYTHING)
    chart_values["dashboards"] |= {"label": "example.com/dashboard", "labelValue": "yes"}
    documents = charts.render(CHART, chart_values)
    maps = [
        doc
        for doc in only(documents, "ConfigMap")
        if "example.com/dashboard" in doc["metadata"]["labels"]
    ]
    built = {
        path.name: json.loads(text)
        for path, text in build.render().items()
        if path.suffix == ".json"
    }

    shipped = {name: json.loads(text) for doc in maps for name, text in doc["data"].items()}
    assert shipped == built
    for doc in maps:
        assert doc["metadata"]["labels"]["example.com/dashboard"] == "yes"
        assert doc["metadata"]["namespace"] == "monitoring"
        assert doc["metadata"]["annotations"] == {"grafana_folder": "fleetmark"}


@pytest.mark.parametrize("path", [DEFAULTS, EVERYTHING], ids=lambda path: path.stem)
def test_metrics_are_scraped_with_the_token_on_a_port_the_ingress_never_routes(
    path: Path,
) -> None:
    chart_values = charts.load_values(path) | {"ingress": charts.load_values(EVERYTHING)["ingress"]}
    chart_values["serviceMonitor"] = {"enabled": True}
    documents = charts.render(CHART, chart_values)
    pod = pod_of(documents, "Deployment")
    (hub,) = pod["containers"]
    env = env_of(hub, documents)
    (service,) = only(documents, "Service")
    (ingress,) = only(documents, "Ingress")
    (monitor,) = only(documents, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]

    ports = {port["name"]: port["containerPort"] for port in hub["ports"]}
    assert ports["metrics"] == int(env["FLEETMARK_METRICS_PORT"]) != ports["http"]
    assert {port["name"] for port in service["spec"]["ports"]} == {"http", "metrics"}
    routed = {
        path["backend"]["service"]["port"]["name"]
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    }
    assert routed == {"http"}
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    # The ServiceMonitor sends the token the hub reads from its file.
    volume, key = mounted_file(pod, hub, env["FLEETMARK_METRICS_TOKEN_FILE"])
    (source,) = (v["secret"] for v in pod["volumes"] if v["name"] == volume)
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": source["secretName"], "key": key},
    }
    assert "FLEETMARK_METRICS_PUBLIC" not in env


def test_the_metrics_token_is_generated_unless_a_secret_is_named() -> None:
    documents = charts.render(CHART, charts.load_values(DEFAULTS))
    (secret,) = named(only(documents, "Secret"), f"{CHART.name}-metrics")
    token = base64.b64decode(secret["data"]["metrics-token"]).decode()

    assert len(token) == 48
    assert token.isalnum()
    # Kept when the release goes: a Prometheus may still hold it.
    assert secret["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_public_metrics_need_no_token() -> None:
    chart_values = charts.load_values(DEFAULTS)
    chart_values["metrics"] = {"port": 9464, "public": True, "token": {"key": "metrics-token"}}
    chart_values["serviceMonitor"] = {"enabled": True}
    documents = charts.render(CHART, chart_values)
    (hub,) = pod_of(documents, "Deployment")["containers"]
    env = env_of(hub, documents)
    (monitor,) = only(documents, "ServiceMonitor")

    assert env["FLEETMARK_METRICS_PUBLIC"] == "true"
    assert "FLEETMARK_METRICS_TOKEN_FILE" not in env
    assert "authorization" not in monitor["spec"]["endpoints"][0]
    assert named(only(documents, "Secret"), f"{CHART.name}-metrics") == []


def test_the_network_policy_lets_in_the_ingress_controller_and_prometheus_by_default() -> None:
    documents = charts.render(CHART, charts.load_values(DEFAULTS))
    (policy,) = only(documents, "NetworkPolicy")
    (deployment,) = only(documents, "Deployment")

    def namespaces(rule: dict[str, Any]) -> list[str]:
        return [
            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
            for peer in rule["from"]
        ]

    http, metrics = policy["spec"]["ingress"]
    assert http["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert namespaces(http) == ["ingress-nginx"]
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert namespaces(metrics) == ["monitoring"]
    # Egress stays open unless rules are given.
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= (
        deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    everything = only(charts.render(CHART, charts.load_values(EVERYTHING)), "NetworkPolicy")
    assert everything[0]["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_behind_a_tls_ingress_the_hub_believes_its_forwarded_scheme() -> None:
    with_tls = charts.load_values(EVERYTHING)
    narrowed = with_tls | {"ingress": with_tls["ingress"] | {"forwardedAllowIps": "10.42.0.0/16"}}
    without_tls = with_tls | {"ingress": with_tls["ingress"] | {"tls": []}}

    def allowed(chart_values: dict[str, Any]) -> str | None:
        documents = charts.render(CHART, chart_values)
        (hub,) = pod_of(documents, "Deployment")["containers"]
        return env_of(hub, documents).get("FLEETMARK_FORWARDED_ALLOW_IPS")

    assert allowed(with_tls) == "*"
    assert allowed(narrowed) == "10.42.0.0/16"
    assert allowed(without_tls) is None
    assert allowed(charts.load_values(DEFAULTS)) is None


def test_a_setting_the_chart_owns_is_refused_by_name() -> None:
    wrong = charts.load_values(DEFAULTS) | {"settings": {"database_url": "postgresql://x/y"}}

    with pytest.raises(helm.HelmRenderError, match=r"settings\.database_url is set by the chart"):
        charts.render(CHART, wrong)


def test_a_value_the_hub_needs_is_required_by_name() -> None:
    without_url = charts.load_values(DEFAULTS)
    del without_url["secret"]["databaseUrl"]

    with pytest.raises(helm.HelmRenderError, match=r"secret\.databaseUrl .* is required"):
        charts.render(CHART, without_url)


@pytest.mark.parametrize(
    ("field", "value"),
    [("adminToken", "fma_short"), ("tokenSecret", "too-short"), ("databaseUrl", "mysql://db/x")],
)
def test_the_schema_refuses_a_secret_the_hub_would_refuse(field: str, value: str) -> None:
    wrong = charts.load_values(DEFAULTS)
    wrong["secret"][field] = value

    with pytest.raises(helm.HelmValuesError, match=rf"/secret/{field}"):
        charts.render(CHART, wrong)

"""docker-compose.yml is a Compose file that `docker compose up` can start once
compose/make-secrets.sh has made its secret files: valid against the Compose Specification's
JSON Schema (tests/data/compose/, whose README.md names the upstream file and commit; nothing
is fetched), every secret a file (never an environment value or on a command line), every
fleetmark container read-only, ports on 127.0.0.1 unless told otherwise, every file it mounts
in the repository, and each service started only after what it needs."""

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator
from sqlalchemy.engine import make_url

from hub.health.router import router as health_router
from hub.security import API_TOKEN_FORMAT
from hub.settings import HubSettings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "data" / "compose" / "compose-spec.json"
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
# ${NAME}, ${NAME:?message}, ${NAME:-default}, ...; `$$` is a literal dollar.
VARIABLE = re.compile(r"(?<!\$)\$\{(\w+)(:?[-?+])?")
SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN")


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_TEXT)
    return loaded


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    schema = json.loads(SCHEMA.read_text())
    Draft7Validator.check_schema(schema)

    errors = [f"{e.json_path}: {e.message}" for e in Draft7Validator(schema).iter_errors(compose())]

    assert errors == []


def test_the_schema_refuses_what_compose_would() -> None:
    validator = Draft7Validator(json.loads(SCHEMA.read_text()))
    wrong = compose()
    wrong["services"]["hub"]["depends_on"]["db-roles"]["condition"] = "service_ready"
    wrong["services"]["hub"]["restart_policy"] = "always"

    assert len(list(validator.iter_errors(wrong))) == 2


def test_no_secret_is_an_environment_value_or_on_a_command_line() -> None:
    document = compose()
    given = {name: service.get("environment", {}) for name, service in document["services"].items()}
    secret_values = {
        (service, variable)
        for service, environment in given.items()
        for variable in environment
        if any(word in variable for word in SECRET_WORDS) and not variable.endswith("_FILE")
    }
    uses = {name for name, _ in VARIABLE.findall(COMPOSE_TEXT)}

    assert all("file" in source for source in document["secrets"].values())
    assert secret_values == set()
    assert uses == {"FLEETMARK_PUBLISH_ADDRESS", "FLEETMARK_ALERT_WEBHOOK_URL"}
    assert "password" not in " ".join(document["services"]["db-roles"]["command"][:2])


def test_every_fleetmark_container_is_read_only_and_the_demo_fleet_is_opt_in() -> None:
    services = compose()["services"]
    fleetmark = {
        name for name, s in services.items() if s.get("image", "").endswith("fleetmark:0.1.0")
    }

    assert fleetmark == {"hub", "grafana-grant", "demo"}
    for name in fleetmark | {"prometheus"}:
        assert services[name]["read_only"] is True, name
        assert services[name]["cap_drop"] == ["ALL"], name
    assert services["demo"]["profiles"] == ["demo"]
    assert [name for name, s in services.items() if "profiles" in s] == ["demo"]


def test_ports_are_published_on_the_loopback_address_unless_told_otherwise() -> None:
    published = [
        port for service in compose()["services"].values() for port in service.get("ports", [])
    ]
    example = (ROOT / ".env.example").read_text()

    assert published
    assert {port.rsplit(":", 2)[0] for port in published} == {
        "${FLEETMARK_PUBLISH_ADDRESS:-127.0.0.1}"
    }
    assert "\nFLEETMARK_PUBLISH_ADDRESS=127.0.0.1\n" in example


def test_the_secret_files_are_made_by_the_script_and_read_by_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "secrets"
    subprocess.run(["sh", str(ROOT / "compose" / "make-secrets.sh"), str(folder)], check=True)
    first = {path.name: path.read_text() for path in folder.iterdir()}
    subprocess.run(["sh", str(ROOT / "compose" / "make-secrets.sh"), str(folder)], check=True)
    document = compose()
    hub = document["services"]["hub"]
    mounted = {f"/run/secrets/{name}": folder / name for name in hub["secrets"]}
    for name in list(os.environ):
        if name.startswith("FLEETMARK_"):
            monkeypatch.delenv(name)
    for name, value in hub["environment"].items():
        monkeypatch.setenv(name, str(mounted.get(value, value)))

    settings = HubSettings()

    assert {source["file"] for source in document["secrets"].values()} == {
        f"./compose/secrets/{name}" for name in first
    }
    assert {path.name: path.read_text() for path in folder.iterdir()} == first  # kept
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert settings.mode == "production"
    assert settings.database_url is not None
    url = make_url(settings.database_url.get_secret_value())
    assert (url.username, url.password, url.host, url.database) == (
        "fleetmark",
        first["hub_db_password"].strip(),
        "db",
        "fleetmark",
    )
    assert API_TOKEN_FORMAT.fullmatch(first["admin_token"].strip())
    assert settings.metrics_port == 9464
    assert settings.metrics_token is not None


def test_prometheus_scrapes_the_hubs_metrics_port_with_the_metrics_token() -> None:
    services = compose()["services"]
    prometheus = services["prometheus"]
    mounts = dict(volume.split(":")[:2] for volume in prometheus["volumes"])
    config = yaml.safe_load((ROOT / "compose" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    hub = services["hub"]["environment"]

    assert mounts["./compose/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    assert job["static_configs"] == [{"targets": [f"hub:{hub['FLEETMARK_METRICS_PORT']}"]}]
    assert job["authorization"] == {
        "type": "Bearer",
        "credentials_file": hub["FLEETMARK_METRICS_TOKEN_FILE"],
    }
    assert "metrics_token" in prometheus["secrets"]
    # The metrics port is the container's own: published nowhere.
    assert [port.rsplit(":", 1)[1] for port in services["hub"]["ports"]] == ["8080"]


def test_grafana_reads_the_prometheus_that_scrapes_the_hub() -> None:
    services = compose()["services"]
    [datasource] = yaml.safe_load(
        (ROOT / "dashboards/provisioning/datasources/prometheus.yaml").read_text()
    )["datasources"]
    config = yaml.safe_load((ROOT / "compose" / "prometheus.yml").read_text())
    published = services["prometheus"]["ports"][0].rsplit(":", 1)[1]

    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "$FLEETMARK_GRAFANA_PROMETHEUS_URL"
    assert services["grafana"]["environment"]["FLEETMARK_GRAFANA_PROMETHEUS_URL"] == (
        f"http://prometheus:{published}"
    )
    # $__rate_interval spans four of the scrape interval Grafana is told.
    assert datasource["jsonData"]["timeInterval"] == config["global"]["scrape_interval"]


def test_compose_routes_the_alerts_to_its_contact_point() -> None:
    """Compose alone provisions a policy (it replaces a Grafana's whole tree): its route takes
    every rule's alerts, one notification per rule and environment."""
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    notifications = yaml.safe_load((ROOT / "compose/alerting/notifications.yaml").read_text())
    rules = yaml.safe_load((ROOT / "dashboards/provisioning/alerting/fleetmark.yaml").read_text())
    [contact] = notifications["contactPoints"]
    [policy] = notifications["policies"]
    [route] = policy["routes"]
    [receiver] = contact["receivers"]

    assert mounts["./compose/alerting/notifications.yaml"].startswith(
        "/etc/grafana/provisioning/alerting/"
    )
    assert policy["receiver"] == route["receiver"] == contact["name"]
    assert all(rule["labels"]["source"] == "fleetmark" for rule in rules["groups"][0]["rules"])
    assert route["object_matchers"] == [["source", "=", "fleetmark"]]
    assert route["group_by"] == ["alertname", "environment"]
    assert receiver["settings"]["url"] == "$FLEETMARK_GRAFANA_ALERT_WEBHOOK_URL"
    assert grafana["environment"]["FLEETMARK_GRAFANA_ALERT_WEBHOOK_URL"].startswith(
        "${FLEETMARK_ALERT_WEBHOOK_URL:-"
    )
    # Neither the chart nor `dashboards push` provisions a policy.
    assert not list((ROOT / "charts").rglob("*notification*"))
    assert "policies" not in (ROOT / "hub/cli/dashboards.py").read_text()


def test_the_services_start_in_order() -> None:
    services = compose()["services"]

    def waits_for(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}

    assert waits_for("db-roles") == {"db": "service_healthy"}
    assert waits_for("hub") == {"db-roles": "service_completed_successfully"}
    assert waits_for("grafana-grant") == {"hub": "service_healthy"}
    assert waits_for("grafana") == {"grafana-grant": "service_completed_successfully"}
    assert waits_for("prometheus") == {"hub": "service_healthy"}
    assert waits_for("demo") == {"hub": "service_healthy"}
    assert "healthcheck" in services["db"]


def test_the_hub_migrates_on_start_and_is_healthy_when_its_database_answers() -> None:
    hub = compose()["services"]["hub"]
    check = " ".join(hub["healthcheck"]["test"])
    served = {route.path for route in health_router.routes}

    assert hub["command"] == ["serve"]  # migrates first: no --no-migrate
    assert "/readyz" in check
    assert "/readyz" in served
    assert hub["environment"]["FLEETMARK_ADMIN_TOKEN_FILE"] == "/run/secrets/admin_token"


def test_the_demo_tells_the_hub_its_story_with_the_admin_token() -> None:
    """The demo runs as tests/dashboards/test_demo_profile.py runs it: the hub at its port, the
    admin token, and its repositories served where the hub's network reaches the demo."""
    services = compose()["services"]
    command = services["demo"]["command"]
    hub_port = services["hub"]["ports"][0].rsplit(":", 1)[1]
    git_port = command[command.index("--git-listen") + 1].rsplit(":", 1)[1]

    assert command[0] == "demo"
    assert command[command.index("--hub") + 1] == f"http://hub:{hub_port}"
    assert command[command.index("--token-file") + 1] == "/run/secrets/admin_token"
    assert command[command.index("--git-url") + 1] == f"http://demo:{git_port}"
    assert services["demo"]["secrets"] == ["admin_token"]
    assert "admin_token" in services["hub"]["secrets"]
    # Its repositories on a tmpfs (the root is read-only); its port published nowhere.
    assert "/var/lib/fleetmark" in services["demo"]["tmpfs"]
    assert "ports" not in services["demo"]
    # The hub reads no local repository: it stays in production mode without the option.
    assert "FLEETMARK_ALLOW_LOCAL_REPOSITORIES" not in services["hub"]["environment"]


def test_grafana_reads_the_repositorys_provisioning_files_and_dashboards() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    provider = yaml.safe_load(
        (ROOT / "dashboards/provisioning/dashboards/fleetmark.yaml").read_text()
    )

    for source in (s for s in mounts if s.startswith("./")):
        assert (ROOT / source).exists(), source
    assert mounts["./dashboards/provisioning/alerting/fleetmark.yaml"] == (
        "/etc/grafana/provisioning/alerting/fleetmark.yaml"
    )
    assert mounts["./dashboards/json"] == provider["providers"][0]["options"]["path"]
    assert (
        mounts["./dashboards/provisioning/datasources"] == "/etc/grafana/provisioning/datasources"
    )
    provisioned = [
        *(ROOT / "dashboards/provisioning/datasources").iterdir(),
        ROOT / "compose/alerting/notifications.yaml",
    ]
    read = {
        name
        for path in provisioned
        for name in re.findall(r"\$(FLEETMARK_GRAFANA_\w+)", path.read_text())
    }
    # The password from its secret file, set by the entrypoint in Grafana's own process.
    given = {name for name in grafana["environment"] if name.startswith("FLEETMARK_")}
    assert read == given | {"FLEETMARK_GRAFANA_DB_PASSWORD"}
    assert (
        'FLEETMARK_GRAFANA_DB_PASSWORD="$$(cat /run/secrets/grafana_db_password)"'
        in (grafana["entrypoint"][-1])
    )
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD__FILE"] == (
        "/run/secrets/grafana_admin_password"
    )

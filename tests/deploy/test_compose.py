"""docker-compose.yml is a Compose file that `docker compose up` can start from a filled-in
.env: valid against the Compose Specification's JSON Schema (tests/data/compose/, whose
README.md names the upstream file and commit; nothing is fetched), every secret required from
.env with no default, every variable in .env.example, every file it mounts in the repository,
and each service started only after what it needs."""

import json
import re
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator

from hub.health.router import router as health_router

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
    wrong["services"]["hub"]["depends_on"]["db"]["condition"] = "service_ready"
    wrong["services"]["hub"]["restart_policy"] = "always"

    assert len(list(validator.iter_errors(wrong))) == 2


def test_every_secret_is_required_from_env_with_no_default() -> None:
    uses = VARIABLE.findall(COMPOSE_TEXT)
    example = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    secrets = {name for name, _ in uses if any(word in name for word in SECRET_WORDS)}
    secrets |= {source["environment"] for source in compose()["secrets"].values()}

    assert uses
    assert {operator for name, operator in uses if name in secrets} == {":?"}
    assert {name for name, _ in uses} | secrets <= example
    assert secrets <= example


def test_no_read_only_service_is_given_a_secret_compose_copies_in() -> None:
    # Compose copies a secret that is not a file into the container, which it refuses to do
    # (and says so) for a read-only root file system (docker/compose#12531).
    document = compose()
    copied = {name for name, source in document["secrets"].items() if "file" not in source}
    given = {
        name: service
        for name, service in document["services"].items()
        if copied & {s if isinstance(s, str) else s["source"] for s in service.get("secrets", [])}
    }

    assert set(given) == {"hub", "simulate"}
    assert [name for name, service in given.items() if service.get("read_only")] == []
    assert document["services"]["grafana-grant"]["read_only"] is True


def test_the_services_start_in_order() -> None:
    services = compose()["services"]

    def waits_for(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}

    assert waits_for("hub") == {"db": "service_healthy"}
    assert waits_for("grafana-role") == {"db": "service_healthy"}
    assert waits_for("grafana-grant") == {
        "hub": "service_healthy",
        "grafana-role": "service_completed_successfully",
    }
    assert waits_for("grafana") == {"grafana-grant": "service_completed_successfully"}
    assert waits_for("simulate") == {"hub": "service_healthy"}
    assert "healthcheck" in services["db"]


def test_the_hub_migrates_on_start_and_is_healthy_when_its_database_answers() -> None:
    hub = compose()["services"]["hub"]
    check = " ".join(hub["healthcheck"]["test"])
    served = {route.path for route in health_router.routes}

    assert hub["command"] == ["serve"]  # migrates first: no --no-migrate
    assert "/readyz" in check
    assert "/readyz" in served
    assert hub["environment"]["FLEETMARK_ADMIN_TOKEN_FILE"] == "/run/secrets/admin_token"


def test_the_simulated_fleet_reports_to_the_hub_with_the_admin_token() -> None:
    services = compose()["services"]
    command = services["simulate"]["command"]
    hub_port = services["hub"]["ports"][0].rsplit(":", 1)[1]

    assert command[command.index("--hub") + 1] == f"http://hub:{hub_port}"
    assert command[command.index("--token-file") + 1] == "/run/secrets/admin_token"
    assert services["simulate"]["secrets"] == services["hub"]["secrets"]


def test_grafana_reads_the_repositorys_provisioning_files_and_dashboards() -> None:
    grafana = compose()["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    provider = yaml.safe_load(
        (ROOT / "dashboards/provisioning/dashboards/fleetmark.yaml").read_text()
    )

    for source in (s for s in mounts if s.startswith("./") and not s.endswith("alerting")):
        assert (ROOT / source).is_dir(), source
    assert mounts["./dashboards/json"] == provider["providers"][0]["options"]["path"]
    assert (
        mounts["./dashboards/provisioning/datasources"] == "/etc/grafana/provisioning/datasources"
    )
    datasource = (ROOT / "dashboards/provisioning/datasources/fleetmark.yaml").read_text()
    read = set(re.findall(r"\$(FLEETMARK_GRAFANA_DB_\w+)", datasource))
    assert read <= set(grafana["environment"])

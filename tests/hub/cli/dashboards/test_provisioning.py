"""The provisioning files a Grafana container mounts (dashboards/provisioning/), held to what
Grafana's provisioning documentation says it reads, and to what `dashboards push` creates."""

import re
from importlib import resources
from typing import Any

import yaml

from hub.cli.dashboards import (
    DATASOURCE_NAME,
    DATASOURCE_TYPE,
    DATASOURCE_UID,
    DEFAULT_FOLDER,
    Connection,
    SSLMode,
)

PROVISIONING = resources.files("dashboards") / "provisioning"

# The fields Grafana's provisioning documentation lists for a data source, for a dashboard
# provider and its options, and those the PostgreSQL data source takes in jsonData and
# secureJsonData ("Provision the data source" of its documentation).
DATASOURCE_FIELDS = {
    "name", "type", "access", "orgId", "uid", "url", "user", "database", "basicAuth",
    "basicAuthUser", "withCredentials", "isDefault", "jsonData", "secureJsonData", "version",
    "editable",
}  # fmt: skip
POSTGRES_JSON_DATA = {
    "database", "sslmode", "maxOpenConns", "maxIdleConns", "maxIdleConnsAuto", "connMaxLifetime",
    "postgresVersion", "timescaledb", "tlsConfigurationMethod", "sslRootCertFile", "sslCertFile",
    "sslKeyFile", "timeInterval",
}  # fmt: skip
POSTGRES_SECURE_JSON_DATA = {"password", "tlsCACert", "tlsClientCert", "tlsClientKey"}
PROVIDER_FIELDS = {
    "name", "orgId", "folder", "folderUid", "type", "disableDeletion", "updateIntervalSeconds",
    "allowUiUpdates", "options",
}  # fmt: skip
PROVIDER_OPTIONS = {"path", "foldersFromFilesStructure"}

ENVIRONMENT = {
    "FLEETMARK_GRAFANA_DB_HOST": "timescale:5432",
    "FLEETMARK_GRAFANA_DB_NAME": "fleetmark",
    "FLEETMARK_GRAFANA_DB_USER": "fleetmark_grafana",
    "FLEETMARK_GRAFANA_DB_PASSWORD": "pw-$ecret",
    "FLEETMARK_GRAFANA_DB_SSLMODE": "disable",
}
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)\}|\$(\w+)")


def load(path: str) -> Any:
    return yaml.safe_load((PROVISIONING / path).read_text(encoding="utf-8"))


def variables(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(variables(item) for item in value.values()))
    if isinstance(value, str):
        return {braced or bare for braced, bare in _VARIABLE.findall(value) if braced or bare}
    return set()


def expand(value: Any, environment: dict[str, str]) -> Any:
    """As Grafana reads a provisioning file: `$VAR` and `${VAR}` in string values become the
    variable's value (empty when unset), `$$` a `$`; other values stay as they are."""
    if isinstance(value, dict):
        return {key: expand(item, environment) for key, item in value.items()}
    if not isinstance(value, str):
        return value
    return _VARIABLE.sub(
        lambda found: "$" if found[0] == "$$" else environment.get(found[1] or found[2], ""),
        value,
    )


def test_the_data_source_file_has_what_grafana_reads() -> None:
    document = load("datasources/fleetmark.yaml")

    assert document["apiVersion"] == 1
    (source,) = document["datasources"]
    assert set(source) <= DATASOURCE_FIELDS
    assert set(source["jsonData"]) <= POSTGRES_JSON_DATA
    assert set(source["secureJsonData"]) <= POSTGRES_SECURE_JSON_DATA
    # Required by Grafana: name, type and access; the uid every panel and alert rule names.
    assert (source["name"], source["uid"]) == (DATASOURCE_NAME, DATASOURCE_UID)
    assert (source["type"], source["access"]) == (DATASOURCE_TYPE, "proxy")
    # Grafana expands variables into strings, and its PostgreSQL plugin reads `timescaledb` as
    # a JSON boolean, refusing a string: the one setting that cannot come from a variable.
    assert source["jsonData"]["timescaledb"] is False
    assert variables(source) == set(ENVIRONMENT)


def test_the_data_source_file_describes_what_push_creates() -> None:
    (source,) = load("datasources/fleetmark.yaml")["datasources"]
    pushed = Connection(
        host=ENVIRONMENT["FLEETMARK_GRAFANA_DB_HOST"],
        database=ENVIRONMENT["FLEETMARK_GRAFANA_DB_NAME"],
        user=ENVIRONMENT["FLEETMARK_GRAFANA_DB_USER"],
        password=ENVIRONMENT["FLEETMARK_GRAFANA_DB_PASSWORD"],
        sslmode=SSLMode(ENVIRONMENT["FLEETMARK_GRAFANA_DB_SSLMODE"]),
        timescaledb=False,
    ).datasource()

    provisioned = expand(source, ENVIRONMENT)

    assert {key: provisioned[key] for key in pushed} == pushed
    assert provisioned["url"] == "timescale:5432"
    assert provisioned["secureJsonData"] == {"password": "pw-$ecret"}


def test_the_dashboard_provider_loads_the_dashboards_into_the_fleetmark_folder() -> None:
    document = load("dashboards/fleetmark.yaml")

    assert document["apiVersion"] == 1
    (provider,) = document["providers"]
    assert set(provider) <= PROVIDER_FIELDS
    assert set(provider["options"]) <= PROVIDER_OPTIONS
    assert provider["name"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards/fleetmark"
    # The folder `dashboards push` uses too; a folder taken from the file tree would override it.
    assert provider["folder"] == DEFAULT_FOLDER
    assert provider["options"]["foldersFromFilesStructure"] is False
    assert variables(provider) == set()

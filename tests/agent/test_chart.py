"""The agent's Helm chart, as far as it can be checked without Helm: its plain files parse,
and its DaemonSet passes every setting a pod needs under the name `AgentSettings` reads."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.settings import AgentSettings

CHART = Path(__file__).resolve().parents[2] / "charts" / "fleetmark-agent"
# Settings for running outside a cluster (a state file, a kubeconfig or a bare API host) or
# set only when given (the hub's CA); the chart passes everything else.
NOT_IN_A_POD = {"state_file", "state_file_max_age", "kubeconfig", "kube_context", "kube_host"}
ONLY_WHEN_GIVEN = {"hub_ca_file", "environment", "cluster_type"}


def load(name: str) -> Any:
    return yaml.safe_load((CHART / name).read_text())


def test_chart_metadata() -> None:
    chart = load("Chart.yaml")
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == CHART.name
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


@pytest.mark.parametrize(
    "values", ["values.yaml", "ci/default-values.yaml", "ci/namespaced-values.yaml"]
)
def test_values_parse(values: str) -> None:
    assert isinstance(load(values), dict)


def test_the_schema_is_json_and_knows_every_top_level_value_it_constrains() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = load("values.yaml")
    assert set(schema["properties"]) <= set(values)
    kinds = schema["properties"]["watch"]["properties"]["kinds"]["items"]["enum"]
    assert values["watch"]["kinds"] == kinds


def test_the_daemonset_passes_every_setting_a_pod_needs() -> None:
    template = (CHART / "templates" / "daemonset.yaml").read_text()
    passed = {name.lower() for name in re.findall(r"name: FLEETMARK_AGENT_([A-Z_]+)", template)}
    fields = set(AgentSettings.model_fields)
    assert passed <= fields, f"not settings: {passed - fields}"
    assert fields - passed - NOT_IN_A_POD - ONLY_WHEN_GIVEN == set()
    assert passed >= ONLY_WHEN_GIVEN


def test_rbac_grants_only_reads_on_the_watched_kinds_and_the_lease() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    watch_verbs = set(re.findall(r"verbs: \[([^\]]*)\]", helpers))
    assert watch_verbs == {'"get", "list", "watch"'}
    lease = (CHART / "templates" / "rbac-lease.yaml").read_text()
    assert set(re.findall(r"verbs: \[([^\]]*)\]", lease)) == {'"create"', '"get", "update"'}

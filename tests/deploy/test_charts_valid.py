"""Both charts, for each of their ci/ values files (the defaults, and every option turned on),
lint clean with Helm's own SDK and render only objects a Kubernetes API server would take as
written, on the oldest and the newest Kubernetes version kubernetes-validate has schemas for;
neither chart claims to install on a version older than that.

Core kinds are validated by kubernetes-validate in strict mode (an unknown field is an error).
The ServiceMonitor is validated against the openAPIV3Schema of prometheus-operator's CRD,
kept in tests/data/crds/monitoring.coreos.com_servicemonitors.yaml (its header names the
upstream file, release and commit), with every object closed so that an unknown field, which
the API server would prune, is an error there too. A kind with neither is an error.
"""

import copy
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import all_versions
from packaging.version import Version

from tests.crds import crd_validators
from tests.deploy import charts

CHART_PATHS = sorted(path for path in charts.CHARTS.iterdir() if (path / "Chart.yaml").exists())
CASES = [(chart, values) for chart in CHART_PATHS for values in charts.ci_values(chart)]
VERSIONS = sorted({Version(version) for version in all_versions()})
OLDEST, NEWEST = (
    f"{VERSIONS[0].major}.{VERSIONS[0].minor}",
    f"{VERSIONS[-1].major}.{VERSIONS[-1].minor}",
)
SERVICE_MONITOR = ("monitoring.coreos.com/v1", "ServiceMonitor")


def case_id(case: tuple[Path, Path]) -> str:
    return f"{case[0].name}-{case[1].stem}"


def problems(document: dict[str, Any], kubernetes_version: str) -> list[str]:
    """What makes `document` an invalid object: `path: message` for each error."""
    if (document["apiVersion"], document["kind"]) == SERVICE_MONITOR:
        validator = crd_validators("monitoring.coreos.com_servicemonitors.yaml")[SERVICE_MONITOR]
        errors = validator.iter_errors(document)
        return [f"{error.json_path}: {error.message}" for error in errors]
    try:
        kubernetes_validate.validate(document, kubernetes_version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as error:
        return [error.message]
    except kubernetes_validate.ValidationError as error:
        return [f"{error.json_path}: {error.message}"]
    return []


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_the_chart_lints_without_warnings(case: tuple[Path, Path]) -> None:
    chart, values = case

    assert charts.lint_problems(chart, charts.load_values(values)) == []


@pytest.mark.parametrize("kubernetes_version", [OLDEST, NEWEST])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_rendered_object_is_valid(case: tuple[Path, Path], kubernetes_version: str) -> None:
    chart, values = case
    documents = charts.render(chart, charts.load_values(values))

    invalid = {
        f"{doc['kind']}/{doc['metadata']['name']}": found
        for doc in documents
        if (found := problems(doc, kubernetes_version))
    }
    assert documents
    assert invalid == {}


@pytest.mark.parametrize("chart", CHART_PATHS, ids=lambda chart: chart.name)
def test_the_chart_claims_no_kubernetes_older_than_the_oldest_validated(chart: Path) -> None:
    claim = yaml.safe_load((chart / "Chart.yaml").read_text())["kubeVersion"]
    match = re.fullmatch(r">=\s*(\d+\.\d+)\.\d+(-0)?", claim)

    assert match is not None, f"{chart.name}: kubeVersion {claim!r} is not a lower bound"
    assert Version(match[1]) >= VERSIONS[0]


def test_every_option_renders_a_service_monitor_that_the_crd_takes() -> None:
    chart = charts.CHARTS / "fleetmark-hub"
    documents = charts.render(chart, charts.load_values(chart / "ci" / "all-options-values.yaml"))
    (monitor,) = (doc for doc in documents if doc["kind"] == "ServiceMonitor")

    assert problems(monitor, NEWEST) == []
    # The CRD's schema does refuse what the operator would not take.
    wrong = copy.deepcopy(monitor)
    wrong["spec"]["endpoints"][0]["interval"] = "30 seconds"
    wrong["spec"]["endpoints"][0]["scrapeInterval"] = "30s"
    assert len(problems(wrong, NEWEST)) == 2

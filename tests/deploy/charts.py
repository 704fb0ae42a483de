"""The repository's Helm charts, rendered by Helm's own SDK as `helm template` would."""

from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="Helm's SDK wheel exists for Linux x86-64 only")

CHARTS = Path(__file__).resolve().parents[2] / "charts"
NAMESPACE = "fleetmark"
WARNING = 2  # Helm lint severities: 1 info, 2 warning, 4 error


def ci_values(chart: Path) -> list[Path]:
    """The values files of `chart`'s ci/ folder: defaults and every option turned on."""
    return sorted((chart / "ci").glob("*.yaml"))


def load_values(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def render(chart: Path, chart_values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest `helm template` would print for `chart`, parsed."""
    with helm.Chart.load(chart) as loaded:
        rendered = loaded.render(chart_values, name=chart.name, namespace=NAMESPACE)
    documents = []
    for path, text in rendered.items():
        if path.endswith(".yaml"):
            documents.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return documents


def lint_problems(chart: Path, chart_values: dict[str, Any]) -> list[Any]:
    """Helm lint's errors and its messages of severity warning or worse."""
    result = helm.lint(chart, chart_values, namespace=NAMESPACE)
    return [*result["errors"], *(m for m in result["messages"] if m["severity"] >= WARNING)]

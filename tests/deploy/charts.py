"""The repository's Helm charts, rendered by Helm's own SDK as `helm template` would, or as
`helm upgrade` would against a cluster holding given Secrets (for the charts' `lookup`)."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import serving_in_thread

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


def render_upgrade(
    chart: Path, chart_values: dict[str, Any], secrets: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every manifest `helm upgrade` would apply for `chart` in a cluster holding `secrets`."""
    with (
        secrets_api(secrets) as url,
        helm.Config(kube_apiserver=url, namespace=NAMESPACE) as config,
        helm.Chart.load(chart) as loaded,
    ):
        rendered = config.render(
            loaded, chart_values, name=chart.name, namespace=NAMESPACE, is_upgrade=True
        )
    return [
        doc
        for path, text in rendered.items()
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


@contextmanager
def secrets_api(secrets: list[dict[str, Any]]) -> Iterator[str]:
    """A Kubernetes API on a local port that serves `secrets` (what Helm's `lookup` of a
    Secret asks: the core group's discovery, then the object) and 404 for anything else."""
    by_path = {
        f"/api/v1/namespaces/{s['metadata']['namespace']}/secrets/{s['metadata']['name']}": s
        for s in secrets
    }
    discovery = {
        "kind": "APIResourceList",
        "groupVersion": "v1",
        "resources": [
            {"name": "secrets", "namespaced": True, "kind": "Secret", "verbs": ["get", "list"]}
        ],
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            found = discovery if path == "/api/v1" else by_path.get(path)
            body = json.dumps(found or {"kind": "Status", "reason": "NotFound", "code": 404})
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving_in_thread(server):
        yield f"http://127.0.0.1:{server.server_port}"


def lint_problems(chart: Path, chart_values: dict[str, Any]) -> list[Any]:
    """Helm lint's errors and its messages of severity warning or worse."""
    result = helm.lint(chart, chart_values, namespace=NAMESPACE)
    return [*result["errors"], *(m for m in result["messages"] if m["severity"] >= WARNING)]

"""The Hub health dashboard against a real Prometheus: `fleetmark serve` as compose runs it
(production mode, /metrics on a port of its own behind the metrics token), Debian's
`prometheus` scraping it with compose/prometheus.yml (its target and token file pointed at the
test's hub), and every panel's PromQL, its variables filled in as Grafana fills them, asked of
that Prometheus: each returns series, so each names metrics and labels a scrape really has.
promtool checks the scrape configuration and lints the scrape.

Debian's package brings both programs (`apt-get install prometheus`). Where it is not
installed these tests are skipped, saying so, except under CI=true: `.ci/run` installs it."""

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dashboards import hubhealth
from hub.palette import HEX
from tests.conftest import DatabaseServer
from tests.dashboards.panels import dashboard_files
from tests.hub.harvest.gitrepo import WorkRepo
from tests.served import ServedHub, free_port, hub_environment, served_hub
from tests.support import bearer, report

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_PROMETHEUS = ROOT / "compose" / "prometheus.yml"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
# Seconds Prometheus may take to start, and every panel to have series.
TIMEOUT = 90.0
SCRAPE_SECONDS = 1

needs_prometheus = pytest.mark.skipif(
    (PROMETHEUS is None or PROMTOOL is None) and not os.environ.get("CI"),
    reason="no Prometheus here: apt-get install prometheus (Debian's package has promtool)",
)
DASHBOARD: dict[str, Any] = next(
    dashboard
    for dashboard in (json.loads(text) for text in dashboard_files().values())
    if dashboard["uid"] == hubhealth.UID
)
PANELS = {panel["title"]: panel for panel in DASHBOARD["panels"]}


def program(found: str | None, name: str) -> str:
    if found is None:
        pytest.fail(f"no {name} here (apt-get install prometheus); CI=true runs these tests")
    return found


def rate_interval(scrape: float, interval: float) -> str:
    """Grafana's $__rate_interval: the step plus a scrape, four scrapes at least."""
    return f"{int(max(interval + scrape, 4 * scrape))}s"


def grafana_expands(expr: str, job: str) -> str:
    """`expr` as Grafana sends it for an instant query: the scrape job variable (its "All" is
    `.*`) and $__rate_interval filled in."""
    expanded = expr.replace(f"${hubhealth.SCRAPE_JOB}", job)
    expanded = expanded.replace("$__rate_interval", rate_interval(SCRAPE_SECONDS, SCRAPE_SECONDS))
    assert "$" not in expanded, expanded
    return expanded


@dataclass
class Scraped:
    hub: ServedHub
    metrics_url: str
    metrics_token: str
    prometheus: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.prometheus}/api/v1/query", params={"query": expr}, timeout=10)
        assert answer.status_code == 200, (expr, answer.text)
        body = answer.json()
        assert body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def series(self, expr: str) -> list[dict[str, Any]]:
        """The expression's series once it has some (the jobs, the harvest and the rates
        need a few scrapes), failing after TIMEOUT with what Prometheus and the hub said."""
        deadline = time.monotonic() + TIMEOUT
        while not (found := self.query(expr)):
            if time.monotonic() > deadline:
                pytest.fail(f"no series for {expr}\nhub:\n{self.hub.output()[-4000:]}")
            time.sleep(0.5)
        return found


def _prometheus_config(tmp: Path, metrics_port: int, token_file: Path) -> Path:
    """compose/prometheus.yml with its target and token file this test's, scraping every
    second."""
    config = yaml.safe_load(COMPOSE_PROMETHEUS.read_text())
    config["global"] |= {
        "scrape_interval": f"{SCRAPE_SECONDS}s",
        "scrape_timeout": f"{SCRAPE_SECONDS}s",
    }
    (job,) = config["scrape_configs"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}"]}]
    job["authorization"]["credentials_file"] = str(token_file)
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _traffic(hub: ServedHub, admin: str) -> None:
    """A cluster registered, a report accepted and one refused: reports by outcome."""
    registered = httpx.post(
        f"{hub.url}/api/v1/clusters",
        json={"name": "drone-dev-1", "environment": "dev", "cluster_type": "drone"},
        headers=bearer(admin),
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    token = registered.json()["token"]
    body = report("drone-dev-1", sequence=1, observed_at=datetime.now(UTC), full_snapshot=True)
    for used, status in ((token, 200), ("fmc_" + "x" * 43, 401)):
        sent = httpx.post(f"{hub.url}/api/v1/reports", json=body, headers=bearer(used), timeout=10)
        assert sent.status_code == status, sent.text


@pytest.fixture(scope="module")
def scraped(
    database_server: DatabaseServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scraped]:
    """The hub with a repository it harvests and one whose fetch fails, then a broken
    repositories file (each harvest round fails); Prometheus scraping it."""
    prometheus_program = program(PROMETHEUS, "prometheus")
    program(PROMTOOL, "promtool")
    tmp = tmp_path_factory.mktemp("hub-health")
    platform = WorkRepo(tmp / "platform")
    platform.commit("The dev environment", {"README.md": "dev\n"})
    repositories = tmp / "repositories.yaml"
    listed = [
        {"url": platform.url, "role": "platform", "branches": ["dev"]},
        {"url": (tmp / "gone").as_uri(), "role": "platform", "branches": ["dev"]},
    ]
    repositories.write_text(yaml.safe_dump({"repositories": listed}))
    metrics_token, admin = tmp / "metrics_token", tmp / "admin_token"
    metrics_token.write_text(secrets.token_urlsafe(36) + "\n")
    admin.write_text(f"fma_{secrets.token_urlsafe(32)}\n")
    metrics_port = free_port()
    every_second = {
        f"FLEETMARK_{job}_INTERVAL": "1"
        for job in ("HARVEST", "DRIFT", "ENV_DIFF", "DORA", "GATE_ANSWERS")
    }
    with database_server.migrated_database() as url:
        environment = hub_environment(
            url,
            tmp / "data",
            FLEETMARK_METRICS_PORT=str(metrics_port),
            FLEETMARK_METRICS_TOKEN_FILE=str(metrics_token),
            FLEETMARK_METRICS_REFRESH_INTERVAL="1",
            FLEETMARK_ADMIN_TOKEN_FILE=str(admin),
            FLEETMARK_REPOSITORIES_FILE=str(repositories),
            FLEETMARK_ALLOW_LOCAL_REPOSITORIES="true",
            **every_second,
        )
        environment["FLEETMARK_MODE"] = "production"
        with served_hub(environment, tmp / "hub.log") as hub:
            _traffic(hub, admin.read_text().strip())
            config = _prometheus_config(tmp, metrics_port, metrics_token)
            checked = subprocess.run(
                [program(PROMTOOL, "promtool"), "check", "config", str(config)],
                capture_output=True,
                text=True,
            )
            assert checked.returncode == 0, checked.stdout + checked.stderr
            port = free_port()
            with (tmp / "prometheus.log").open("wb") as log:
                process = subprocess.Popen(
                    [
                        prometheus_program,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={tmp / 'tsdb'}",
                        f"--web.listen-address=127.0.0.1:{port}",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            try:
                found = Scraped(
                    hub,
                    f"http://127.0.0.1:{metrics_port}/metrics",
                    metrics_token.read_text().strip(),
                    f"http://127.0.0.1:{port}",
                )
                _ready(found, process, tmp / "prometheus.log")
                # A harvest succeeded; from now on each fails.
                found.series('fleetmark_job_last_success_timestamp_seconds{job_name="harvest"}')
                repositories.write_text("repositories: [\n")
                yield found
            finally:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)


def _ready(scraped: Scraped, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while True:
        assert process.poll() is None, f"prometheus exited:\n{log.read_text()}"
        try:
            if httpx.get(f"{scraped.prometheus}/-/ready", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)


@needs_prometheus
def test_the_compose_scrape_configuration_is_valid() -> None:
    """promtool reads compose/prometheus.yml as Prometheus would (the token file is compose's
    secret, absent here: the fixture checks a copy that names one in full)."""
    checked = subprocess.run(
        [program(PROMTOOL, "promtool"), "check", "config", "--syntax-only", COMPOSE_PROMETHEUS],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@needs_prometheus
def test_prometheus_scrapes_the_hub_with_the_metrics_token(scraped: Scraped) -> None:
    [up] = scraped.series('up{job="fleetmark"}')

    assert up["value"][1] == "1"
    # Without the token the hub refuses the scrape.
    assert httpx.get(scraped.metrics_url, timeout=10).status_code == 401
    # No exported label clashes with Prometheus's own `job` and `instance`.
    assert scraped.query('{exported_job!=""}') == []
    assert scraped.query('{exported_instance!=""}') == []


@needs_prometheus
def test_the_scrape_passes_promtool_lint(scraped: Scraped) -> None:
    scraped.series('fleetmark_job_last_success_timestamp_seconds{job_name="drift"}')
    text = httpx.get(scraped.metrics_url, headers=bearer(scraped.metrics_token), timeout=10).text
    linted = subprocess.run(
        [program(PROMTOOL, "promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
    )

    assert linted.returncode == 0, linted.stdout + linted.stderr


@needs_prometheus
def test_the_scrape_job_variable_lists_the_hub(scraped: Scraped) -> None:
    [variable] = [v for v in DASHBOARD["templating"]["list"] if v["name"] == hubhealth.SCRAPE_JOB]
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]).groups()  # type: ignore[union-attr]
    scraped.series(metric)

    answer = httpx.get(
        f"{scraped.prometheus}/api/v1/label/{label}/values",
        params={"match[]": metric},
        timeout=10,
    ).json()

    assert answer["data"] == ["fleetmark"]


@needs_prometheus
@pytest.mark.parametrize("title", list(PANELS))
@pytest.mark.parametrize("job", [".*", "fleetmark"])
def test_every_panel_returns_series_from_a_real_scrape(
    scraped: Scraped, title: str, job: str
) -> None:
    """Each expression as Grafana sends it, with "All" (`.*`) and with the compose scrape
    job chosen, has series: the metric names and labels it reads are those of the scrape."""
    for target in PANELS[title]["targets"]:
        found = scraped.series(grafana_expands(target["expr"], job))
        assert all(len(series["value"]) == 2 for series in found), found


@needs_prometheus
def test_the_jobs_table_shows_each_job_and_a_failing_one(scraped: Scraped) -> None:
    since_success, took, since_failure = (
        grafana_expands(target["expr"], ".*") for target in PANELS["Jobs"]["targets"]
    )
    deadline = time.monotonic() + TIMEOUT
    while "harvest" not in {s["metric"]["job_name"] for s in scraped.query(since_failure)}:
        assert time.monotonic() < deadline, scraped.hub.output()[-4000:]
        time.sleep(0.5)

    succeeded = {
        s["metric"]["job_name"]: float(s["value"][1]) for s in scraped.query(since_success)
    }
    durations = {s["metric"]["job_name"]: float(s["value"][1]) for s in scraped.query(took)}

    assert {"harvest", "drift", "env_diff", "gate_answers", "dora"} <= succeeded.keys()
    assert all(seconds >= 0 for seconds in succeeded.values())
    assert durations.keys() == succeeded.keys()


@needs_prometheus
def test_failing_fetches_name_the_repository(scraped: Scraped) -> None:
    [target] = PANELS["Failing fetches"]["targets"]
    [failing] = scraped.series(grafana_expands(target["expr"], ".*"))

    assert failing["metric"]["repository"].endswith("/gone")
    assert failing["metric"]["role"] == "platform"


def test_every_panel_reads_the_chosen_prometheus() -> None:
    for panel in DASHBOARD["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${prometheus}"}
        for target in panel["targets"]:
            assert f'job=~"${hubhealth.SCRAPE_JOB}"' in target["expr"], panel["title"]
    [source] = [v for v in DASHBOARD["templating"]["list"] if v["name"] == hubhealth.PROMETHEUS]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")


def test_the_stats_draw_in_the_palettes_colours() -> None:
    def steps(title: str) -> list[tuple[float | None, str]]:
        thresholds = PANELS[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        return [(step["value"], step["color"]) for step in thresholds]

    reachable = PANELS["Store reachable"]["fieldConfig"]["defaults"]

    assert steps("Store reachable") == [(None, HEX["bad"]), (1, HEX["ok"])]
    assert {
        value: found["text"] for value, found in reachable["mappings"][0]["options"].items()
    } == {
        "0": "unreachable",
        "1": "reachable",
    }
    assert steps("Repositories whose fetch fails") == [(None, HEX["ok"]), (1, HEX["bad"])]

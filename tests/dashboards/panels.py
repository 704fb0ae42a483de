"""The panels of the built dashboards, read back from their JSON into the SDK's models, and
the variables as a dashboard opens with them ("All"): what the tests and
benchmarks/dashboards.py run."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grafana_foundation_sdk.models import prometheus
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

from dashboards import build, hubhealth, postgres
from tests.dashboards.grafana_sql import Variable, expand

__all__ = ["PanelQuery", "built_dashboards", "dashboard_files", "opened", "panel_queries"]


def dashboard_files() -> dict[Path, str]:
    """The dashboards' JSON files of a fresh build, by path (the build makes other files too)."""
    return {path: text for path, text in build.render().items() if path.suffix == ".json"}


def built_dashboards() -> list[Dashboard]:
    """Every dashboard `python -m dashboards build` writes, read back into the SDK's models."""
    postgres.register()
    return [Dashboard.from_json(json.loads(content)) for content in dashboard_files().values()]


@dataclass(frozen=True)
class PanelQuery:
    dashboard: Dashboard
    panel: Panel
    query: postgres.PostgresQuery

    @property
    def key(self) -> str:
        return f"{self.dashboard.uid}: {self.panel.title}"

    def max_data_points(self, screen: int) -> int:
        """What Grafana asks this panel's query for: its maxDataPoints, else its width in
        pixels on a dashboard `screen` pixels wide (24 grid columns)."""
        if self.panel.max_data_points:
            return int(self.panel.max_data_points)
        assert self.panel.grid_pos is not None, self.key
        return screen * self.panel.grid_pos.w // 24


def panel_queries() -> list[PanelQuery]:
    """Every panel's SQL; the panels of the Prometheus dashboard (Hub health) have none."""
    found = []
    for dashboard in built_dashboards():
        for panel in dashboard.panels or []:
            assert isinstance(panel, Panel), panel
            for target in panel.targets or []:
                if isinstance(target, prometheus.Dataquery):
                    assert dashboard.uid == hubhealth.UID, (dashboard.uid, panel.title)
                    continue
                assert isinstance(target, postgres.PostgresQuery), (panel.title, target)
                found.append(PanelQuery(dashboard, panel, target))
    return found


def opened(dashboard: Dashboard, first: Callable[[str], str] | None = None) -> dict[str, Variable]:
    """The variables of a dashboard as it opens: "All" (the variable's custom all value, so no
    option list is needed), a constant its value, and a variable without "All" its first
    option: what `first` answers for its query (expanded with the variables before it)."""
    assert dashboard.templating is not None
    assert dashboard.templating.list_val is not None
    variables: dict[str, Variable] = {}
    for model in dashboard.templating.list_val:
        assert isinstance(model.query, str)
        if model.type_val == "constant":
            variables[model.name] = Variable([model.query], multi=False, include_all=False)
        elif model.all_value is not None:
            variables[model.name] = Variable(None, all_value=model.all_value)
        else:
            assert first is not None, f"{model.name} has no All: it opens on its first option"
            now = datetime.now(UTC)
            query = expand(model.query, variables=variables, time_from=now, time_to=now)
            variables[model.name] = Variable([first(query)], multi=False, include_all=False)
    return variables

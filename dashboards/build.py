"""The dashboards as files: built from their modules, written under dashboards/, checked.

`render()` numbers the panels, adds the freshness line and the links, and returns every file
by path; `generated()` adds the Helm chart's copies; `python -m dashboards check` compares
them with the committed ones.
"""

import json
from pathlib import Path
from types import ModuleType

from grafana_foundation_sdk.builders.dashboard import DashboardLink
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard, DashboardLinkType, GridPos, Panel

from dashboards import (
    alerts,
    cluster,
    dora,
    drift,
    envdiff,
    fleet,
    history,
    hubhealth,
    promotion,
)
from dashboards.common import VARIABLES, dashboard_url, freshness

__all__ = [
    "ALERT_RULES",
    "CHART_DASHBOARDS",
    "DASHBOARDS",
    "ROOT",
    "check",
    "generated",
    "render",
    "write",
]

ROOT = Path(__file__).resolve().parent
DASHBOARDS: tuple[ModuleType, ...] = (
    fleet,
    drift,
    envdiff,
    history,
    dora,
    promotion,
    cluster,
    hubhealth,
)
ALERT_RULES = ROOT / "provisioning" / "alerting" / "fleetmark.yaml"
# charts/fleetmark-hub/dashboards/ of a checkout: the JSON the chart puts in ConfigMaps.
CHART_DASHBOARDS = ROOT.parent / "charts" / "fleetmark-hub" / "dashboards"


def _variables(built: Dashboard) -> set[str]:
    listed = built.templating.list_val if built.templating is not None else None
    return {variable.name for variable in listed or []}


def _links(current: str, dashboards: dict[str, Dashboard]) -> list[DashboardLink]:
    ours = _variables(dashboards[current])
    return [
        DashboardLink(module.TITLE)
        .type(DashboardLinkType.LINK)
        .url(
            dashboard_url(
                module.UID,
                carried=[name for name in VARIABLES if name in ours & _variables(theirs)],
            )
        )
        .icon("dashboard")
        for module in DASHBOARDS
        if current != module.UID and (theirs := dashboards[module.UID])
    ]


def _built(module: ModuleType) -> Dashboard:
    built: Dashboard = module.build()
    panels = built.panels or []
    for number, panel in enumerate(panels, start=1):
        assert isinstance(panel, Panel), panel
        panel.id_val = number
    if not _variables(built) & set(VARIABLES):
        return built  # reads no view of the store
    line = freshness().build()
    assert line.grid_pos is not None
    for panel in panels:
        assert isinstance(panel, Panel), panel
        assert panel.grid_pos is not None, panel.title
        panel.grid_pos.y += line.grid_pos.h
    line.id_val = len(panels) + 1
    line.grid_pos = GridPos(h=line.grid_pos.h, w=line.grid_pos.w, x=0, y=0)
    built.panels = [*panels, line]
    return built


def render() -> dict[Path, str]:
    files: dict[Path, str] = {}
    dashboards = {module.UID: _built(module) for module in DASHBOARDS}
    for uid, built in dashboards.items():
        built.links = [link.build() for link in _links(uid, dashboards)]
    for uid, built in dashboards.items():
        text = json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False)
        files[ROOT / "json" / f"{uid}.json"] = text + "\n"
    files[ALERT_RULES] = alerts.render(dashboards)
    return files


def generated() -> dict[Path, str]:
    """Every file `python -m dashboards build` writes: render()'s and the chart's copies of the
    dashboards."""
    files = render()
    return files | {
        CHART_DASHBOARDS / path.name: text for path, text in files.items() if path.suffix == ".json"
    }


def write() -> list[Path]:
    written = []
    for path, text in generated().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def check() -> list[Path]:
    """The files that differ from a fresh build (or are missing)."""
    return [
        path
        for path, text in generated().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]

"""The dashboards as files: built from their modules, written under dashboards/, checked.

`DASHBOARDS` lists one builder module per dashboard; each has `UID`, `TITLE` and `build()`
returning the dashboard without links. `render()` adds to every dashboard a link to each of
the others (by uid, with the variables and time range carried over) and returns every file
that `python -m dashboards build` writes, by path, with its text; `python -m dashboards
check` compares the committed files with it.
"""

import json
from pathlib import Path
from types import ModuleType

from grafana_foundation_sdk.builders.dashboard import DashboardLink
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DashboardLinkType

from dashboards import cluster, drift, fleet, history
from dashboards.common import dashboard_url

__all__ = ["DASHBOARDS", "ROOT", "check", "render", "write"]

ROOT = Path(__file__).resolve().parent
DASHBOARDS: tuple[ModuleType, ...] = (fleet, drift, history, cluster)


def _links(current: str) -> list[DashboardLink]:
    return [
        DashboardLink(module.TITLE)
        .type(DashboardLinkType.LINK)
        .url(dashboard_url(module.UID))
        .icon("dashboard")
        for module in DASHBOARDS
        if current != module.UID
    ]


def render() -> dict[Path, str]:
    files: dict[Path, str] = {}
    for module in DASHBOARDS:
        built = module.build()
        built.links = [link.build() for link in _links(module.UID)]
        text = json.dumps(built, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False)
        files[ROOT / "json" / f"{module.UID}.json"] = text + "\n"
    return files


def write() -> list[Path]:
    written = []
    for path, text in render().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def check() -> list[Path]:
    """The files that differ from a fresh build (or are missing)."""
    return [
        path
        for path, text in render().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]

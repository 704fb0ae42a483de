"""The event types the jobs publish, and the JSON Schemas docs/events.md shows for their data:
generated from the models the jobs build the data with."""

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

from hub.tasks import EVENT_TYPES

DOCS = Path(__file__).parents[3] / "docs"
# The types the hub promises (docs/events.md, "Event types").
PROMISED = {
    "fleetmark.gate.passed",
    "fleetmark.gate.failed",
    "fleetmark.gate.pending",
    "fleetmark.rollout.started",
    "fleetmark.rollout.converged",
    "fleetmark.rollout.failed",
    "fleetmark.rollout.stalled",
    "fleetmark.rollout.halted",
    "fleetmark.rollout.unhalted",
    "fleetmark.suspect.found",
    "fleetmark.drift.started",
    "fleetmark.drift.resolved",
    "fleetmark.cluster.stale",
    "fleetmark.cluster.recovered",
    "fleetmark.harvest.failing",
    "fleetmark.harvest.recovered",
    "fleetmark.schedule.failed",
    "fleetmark.schedule.recovered",
}
SECTION = re.compile(
    r"^### (?P<types>[^\n]+)\n\n(?:[^\n]+\n\n)?```json\n(?P<schema>.*?)\n```", re.M | re.S
)


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_promised_type_has_a_model_of_its_data() -> None:
    assert set(EVENT_TYPES) == PROMISED


def test_the_documented_schemas_are_the_models() -> None:
    page = (DOCS / "events.md").read_text()
    rendered = hooks().on_page_markdown(page)

    documented = {}
    for section in SECTION.finditer(rendered[rendered.index("### The data of each type") :]):
        schema = json.loads(section["schema"])
        for name in re.findall(r"`([a-z.]+)`", section["types"]):
            documented[name] = schema

    assert set(documented) == PROMISED
    for name, schema in documented.items():
        model = EVENT_TYPES[name].model_json_schema()
        assert schema == {"$schema": "https://json-schema.org/draft/2020-12/schema", **model}, name

"""Objects of unexpected shape: every mapper still gives a record, in Unknown state, saying why.

The property tests feed the mappers arbitrary JSON-like objects, and real objects with one part
replaced by arbitrary JSON, and check that a record comes out that the hub would accept.
"""

import copy
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.report import ObjectRecord
from agent.sources import WATCHED_KINDS, WatchedKind, argocd, flux
from agent.sources.generic import StateFile, StateFileError, parse_state
from hub.ingest import schemas as hub
from tests.agent.examples import (
    NOW,
    SHA_A,
    SHA_B,
    SHA_C,
    application,
    git_repository,
    helm_release_v2,
    helm_release_v2beta1,
    history_entry,
    kustomization,
    multi_source_application,
    oci_repository,
)

Mapper = Callable[[Mapping[str, object], datetime], ObjectRecord]
MAPPERS: dict[str, Mapper] = {entry.kind: entry.mapper for entry in WATCHED_KINDS}

EXAMPLES: list[tuple[str, dict[str, Any]]] = [
    ("Kustomization", kustomization()),
    ("Kustomization", kustomization(applied=f"main/{SHA_A}")),
    ("HelmRelease", helm_release_v2()),
    ("HelmRelease", helm_release_v2beta1()),
    ("GitRepository", git_repository({"branch": "main"})),
    ("OCIRepository", oci_repository({"tag": "latest"}, f"latest@sha256:{'0' * 64}")),
    ("Application", application(applied=SHA_A, compared=SHA_B, sync="OutOfSync")),
    ("Application", multi_source_application(applied=["1.0.0", SHA_A], compared=["1.0.0", SHA_A])),
]


def unknown(record: ObjectRecord) -> str:
    """The message of a record in Unknown state for an unexpected shape."""
    assert record.ready is None
    assert record.reason == "UnexpectedShape"
    assert record.health == "Unknown"
    assert record.message is not None
    return record.message


def named(name: str = "apps", **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "flux-system"}, **fields}


# --- chosen garbage ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(MAPPERS))
def test_empty_object_is_reported_unnamed_and_unknown(kind: str) -> None:
    record = MAPPERS[kind]({}, NOW)

    assert record.kind == kind
    assert record.name == "(unnamed)"
    assert "metadata.name: missing" in unknown(record)


@pytest.mark.parametrize("kind", sorted(MAPPERS))
def test_status_that_is_not_an_object_is_named(kind: str) -> None:
    record = MAPPERS[kind](named(status=["Ready"]), NOW)

    assert record.name == "apps"
    assert "status: expected an object, got a list" in unknown(record)


@pytest.mark.parametrize("kind", sorted(MAPPERS))
def test_metadata_that_is_not_an_object_is_named(kind: str) -> None:
    record = MAPPERS[kind]({"metadata": "apps", "status": {}}, NOW)

    assert "metadata: expected an object, got a string" in unknown(record)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ({"type": "Ready", "status": "True"}, "status.conditions: expected a list, got an object"),
        (["Ready"], "status.conditions[0]: expected an object, got a string"),
        ([{"type": "Ready", "status": True}], "status.conditions[0].status: expected a string"),
        ([{"type": "Ready", "status": "Yes"}], "expected True, False or Unknown, got 'Yes'"),
        ([{"status": "True"}], "status.conditions[0].type: missing"),
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}],
            "status.conditions[0].lastTransitionTime: not an RFC 3339 time: 'yesterday'",
        ),
        (
            [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-22T11:00:00"}],
            "time without a UTC offset",
        ),
        (
            [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": "0001-01-01T00:00:00+01:00",
                }
            ],
            "time out of range",
        ),
    ],
    ids=[
        "mapping",
        "string-item",
        "bool-status",
        "odd-status",
        "no-type",
        "bad-time",
        "naive",
        "range",
    ],
)
@pytest.mark.parametrize("kind", ["Kustomization", "HelmRelease", "GitRepository", "OCIRepository"])
def test_garbage_flux_conditions_are_named(kind: str, conditions: object, expected: str) -> None:
    obj = named(status={"conditions": conditions, "lastAppliedRevision": f"main@sha1:{SHA_A}"})

    assert expected in unknown(MAPPERS[kind](obj, NOW))


def test_what_could_be_read_is_still_reported() -> None:
    obj = kustomization()
    obj["spec"]["suspend"] = "yes"

    record = flux.kustomization(obj, NOW)

    assert unknown(record) == "spec.suspend: expected true or false, got a string"
    assert record.applied_revision == f"main@sha1:{SHA_A}"
    assert record.suspended is False


def test_revision_of_the_wrong_type_is_named_not_reported() -> None:
    obj = kustomization()
    obj["status"]["lastAppliedRevision"] = 42

    record = flux.kustomization(obj, NOW)

    assert unknown(record) == "status.lastAppliedRevision: expected a string, got a number"
    assert record.applied_revision is None


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ({"chartVersion": "6.5.4"}, "status.history: expected a list, got an object"),
        ([{"status": "deployed"}], "status.history[0].chartVersion: missing"),
        ([{"chartVersion": "6.5.4"}], "status.history[0].status: missing"),
        ([7], "status.history[0]: expected an object, got a number"),
    ],
)
def test_garbage_helm_history_is_named(history: object, expected: str) -> None:
    obj = helm_release_v2()
    obj["status"]["history"] = history

    record = flux.helm_release(obj, NOW)

    assert expected in unknown(record)
    assert record.applied_revision is None


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("status", "sync"), "Synced", "status.sync: expected an object, got a string"),
        (
            ("status", "history"),
            [history_entry(SHA_C, 1), SHA_A],
            "status.history[1]: expected an object, got a string",
        ),
        (
            ("status", "health", "status"),
            5,
            "status.health.status: expected a string, got a number",
        ),
        (("status", "operationState", "syncResult", "revisions"), "abc", "expected a list"),
        (("status", "conditions"), [{"message": "x"}], "status.conditions[0].type: missing"),
        (("spec", "sources"), ["https://example.com"], "spec.sources[0]: expected an object"),
        (("metadata", "annotations"), ["skip"], "metadata.annotations: expected an object"),
    ],
    ids=["sync", "history-item", "health", "revisions", "condition", "sources", "annotations"],
)
def test_garbage_application_fields_are_named(
    path: tuple[str, ...], value: object, expected: str
) -> None:
    obj = application()
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value

    assert expected in unknown(argocd.application(obj, NOW))


# --- the table of watched kinds ------------------------------------------------------------


@pytest.mark.parametrize("entry", WATCHED_KINDS, ids=lambda entry: entry.kind)
def test_each_watched_kind_maps_to_records_of_that_kind(entry: WatchedKind) -> None:
    record = entry.mapper(named(), NOW)

    assert (record.reconciler, record.kind) == (entry.reconciler, entry.kind)
    assert entry.plural == entry.plural.lower()
    assert entry.plural.endswith("s")


@pytest.mark.parametrize(("kind", "obj"), EXAMPLES, ids=[kind for kind, _ in EXAMPLES])
def test_the_examples_are_of_versions_the_agent_watches(kind: str, obj: dict[str, Any]) -> None:
    group, version = obj["apiVersion"].split("/")
    (entry,) = [entry for entry in WATCHED_KINDS if entry.kind == kind]

    assert (entry.group, obj["kind"]) == (group, kind)
    assert version in entry.versions


# --- properties ----------------------------------------------------------------------------

FIELD_NAMES = sorted(
    {
        *("metadata", "name", "namespace", "annotations", "spec", "status", "conditions"),
        *("type", "reason", "message", "lastTransitionTime", "lastAppliedRevision"),
        *("lastAttemptedRevision", "history", "chartVersion", "appVersion", "sourceRef"),
        *("kind", "path", "suspend", "chart", "chartRef", "artifact", "revision", "revisions"),
        *("url", "ref", "branch", "tag", "semver", "commit", "digest", "source", "sources"),
        *("repoURL", "targetRevision", "sync", "health", "operationState", "phase"),
        *("syncResult", "operation", "dryRun", "deployedAt", "finishedAt", "startedAt"),
        *("objects", "written_at", "ready", "applied_revision", "drifted", "suspended"),
    }
)
KEYS = st.sampled_from(FIELD_NAMES) | st.text(max_size=6)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from(["True", "False", "Unknown", "deployed", "OutOfSync", "Failed", "Healthy"])
    | st.sampled_from(
        [SHA_A, f"main@sha1:{SHA_A}", "2026-11-22T11:00:00Z", "9999-12-31T23:59:59-23:59"]
    )
    | st.text()
)
JSON = st.recursive(
    LEAVES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=5),
    max_leaves=40,
)
OBJECTS = st.dictionaries(KEYS, JSON, max_size=6)


def hub_accepts(record: ObjectRecord) -> None:
    hub.ObjectRecord.model_validate_json(record.model_dump_json())


@settings(database=None, deadline=None, max_examples=300)
@given(kind=st.sampled_from(sorted(MAPPERS)), obj=OBJECTS)
def test_mappers_never_raise_on_arbitrary_objects(kind: str, obj: dict[str, Any]) -> None:
    record = MAPPERS[kind](obj, NOW)

    assert record.kind == kind
    hub_accepts(record)


@st.composite
def mutated_examples(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A real object with one value, at any depth, replaced by arbitrary JSON."""
    kind, example = draw(st.sampled_from(EXAMPLES))
    obj = copy.deepcopy(example)
    node: Any = obj
    while True:
        if isinstance(node, dict):
            key: Any = draw(st.sampled_from(sorted(node)))
        else:
            key = draw(st.integers(min_value=0, max_value=len(node) - 1))
        child = node[key]
        if isinstance(child, dict | list) and child and draw(st.booleans()):
            node = child
            continue
        node[key] = draw(JSON)
        return kind, obj


@settings(database=None, deadline=None, max_examples=400)
@given(mutated_examples())
def test_mappers_never_raise_on_real_objects_with_a_part_replaced(
    example: tuple[str, dict[str, Any]],
) -> None:
    kind, obj = example

    record = MAPPERS[kind](obj, NOW)

    assert record.kind == kind
    hub_accepts(record)


ENTRIES = st.dictionaries(KEYS, JSON, max_size=8) | JSON
DOCUMENTS = st.fixed_dictionaries({"objects": st.lists(ENTRIES, max_size=5)}) | JSON


def parse_or_error(data: bytes, origin: str) -> StateFile | str:
    try:
        return parse_state(data, origin=origin, now=NOW)
    except StateFileError as error:
        return str(error)


@settings(database=None, deadline=None, max_examples=200)
@given(document=DOCUMENTS)
def test_state_file_of_any_json_gives_records_or_a_file_error(document: object) -> None:
    outcome = parse_or_error(json.dumps(document).encode(), "state.json")

    if isinstance(outcome, str):
        assert outcome.startswith("state.json: ")
        return
    for record in outcome.records:
        assert record.reconciler == "generic"
        hub_accepts(record)
    assert all(error.startswith("state.json: objects[") for error in outcome.errors)


@settings(database=None, deadline=None, max_examples=200)
@given(text=st.text() | DOCUMENTS.map(lambda document: yaml.safe_dump(document)))
def test_state_file_of_any_text_gives_records_or_a_file_error(text: str) -> None:
    outcome = parse_or_error(text.encode("utf-8", "surrogatepass"), "state.yaml")

    if isinstance(outcome, str):
        assert outcome.startswith("state.yaml: ")
        return
    for record in outcome.records:
        hub_accepts(record)

"""The state file source for hosts without Kubernetes: good files, bad files, bad entries."""

import json
from datetime import timedelta
from pathlib import Path

import pytest

from agent.report import Source
from agent.sources.generic import (
    MAX_STATE_FILE_BYTES,
    StateFileError,
    parse_state,
    read_state_file,
)
from tests.agent.examples import EARLIER_AT, NOW, SHA_A, SHA_B

STATE_YAML = f"""\
written_at: 2026-11-22T11:59:00Z
objects:
  - kind: Playbook
    name: site
    namespace: web
    source:
      url: https://git.contoso.example/ops/site.git
      ref: main
      path: playbooks/site.yml
    applied_revision: "main@sha1:{SHA_A}"
    attempted_revision: "main@sha1:{SHA_B}"
    ready: false
    reason: RunFailed
    message: "failed=1 ok=11"
    last_transition_at: 2026-11-22T11:00:00Z
  - kind: Package
    name: nginx
    applied_revision: "1.24.0"
    ready: true
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_state_file_becomes_generic_records(tmp_path: Path) -> None:
    state = read_state_file(write(tmp_path, "state.yaml", STATE_YAML), NOW)

    assert state.errors == ()
    site, nginx = state.records
    assert site.reconciler == "generic"
    assert (site.kind, site.namespace, site.name) == ("Playbook", "web", "site")
    assert site.source == Source(
        url="https://git.contoso.example/ops/site.git", ref="main", path="playbooks/site.yml"
    )
    assert site.applied_revision == f"main@sha1:{SHA_A}"
    assert site.attempted_revision == f"main@sha1:{SHA_B}"
    assert site.ready is False
    assert site.reason == "RunFailed"
    assert site.message == "failed=1 ok=11"
    assert site.health == "Degraded"
    assert site.last_transition_at == EARLIER_AT
    assert (nginx.kind, nginx.namespace, nginx.name) == ("Package", "", "nginx")
    assert nginx.ready is True
    assert nginx.health == "Healthy"
    assert nginx.source is None


def test_json_state_file_is_read_as_json(tmp_path: Path) -> None:
    document = {
        "objects": [
            {"kind": "Script", "name": "deploy", "applied_revision": SHA_A, "health": "Progressing"}
        ]
    }
    state = read_state_file(write(tmp_path, "state.json", json.dumps(document)), NOW)

    (record,) = state.records
    assert record.applied_revision == SHA_A
    assert record.ready is None
    assert record.health == "Progressing"


def test_empty_objects_list_reports_nothing() -> None:
    state = parse_state(b"objects: []\n", origin="state.yaml", now=NOW)

    assert state.records == ()
    assert state.errors == ()


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("state.yaml", "objects: [\n", "not valid YAML"),
        ("state.json", '{"objects": [}', "not valid JSON"),
        (
            "state.yaml",
            "- kind: Playbook\n",
            "expected a mapping with an `objects` list, got a list",
        ),
        ("state.yaml", "written_at: 2026-11-22T11:59:00Z\n", "has no `objects` list"),
        ("state.yaml", "objects: {kind: Playbook}\n", "objects: expected a list, got an object"),
        ("state.yaml", "objects: []\nwriten_at: now\n", "unknown top-level field(s): writen_at"),
        ("state.yaml", "objects: []\nwritten_at: yesterday\n", "written_at: not an RFC 3339 time"),
    ],
    ids=["yaml", "json", "list", "no-objects", "objects-mapping", "unknown-field", "written-at"],
)
def test_unusable_file_raises_an_error_naming_the_file(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = write(tmp_path, name, text)

    with pytest.raises(StateFileError) as caught:
        read_state_file(path, NOW)

    assert str(caught.value).startswith(f"{path}: ")
    assert expected in str(caught.value)


def test_missing_file_raises_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"

    with pytest.raises(StateFileError, match=r"absent\.yaml: cannot be read"):
        read_state_file(path, NOW)


def test_oversized_file_is_refused_without_parsing(tmp_path: Path) -> None:
    path = tmp_path / "state.yaml"
    path.write_bytes(b"#" * (MAX_STATE_FILE_BYTES + 1))

    with pytest.raises(StateFileError, match="larger than"):
        read_state_file(path, NOW)


def test_file_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(StateFileError, match=r"state\.yaml: not UTF-8"):
        parse_state(b"objects: []\n\xff\n", origin="state.yaml", now=NOW)


def test_entry_with_wrong_types_is_reported_unknown_with_the_fields_named() -> None:
    text = b"""\
objects:
  - kind: Playbook
    name: site
    applied_revision: 1.10
    ready: "yes please"
    colour: blue
"""
    state = parse_state(text, origin="state.yaml", now=NOW)

    (record,) = state.records
    assert record.ready is None
    assert record.reason == "UnexpectedShape"
    assert record.health == "Unknown"
    assert record.message is not None
    assert "applied_revision: expected a string, got the number 1.1; quote it" in record.message
    assert "ready: expected true or false, got a string" in record.message
    assert "colour: not a field of a state file entry" in record.message


def test_unknown_source_field_is_named() -> None:
    text = b"objects:\n  - {kind: Playbook, name: site, source: {repo: x}}\n"

    (record,) = parse_state(text, origin="state.yaml", now=NOW).records

    assert record.reason == "UnexpectedShape"
    assert record.message == "source.repo: not a field of a source"


def test_entries_without_identity_are_errors_naming_file_and_entry() -> None:
    text = b"""\
objects:
  - kind: Playbook
  - name: yes
    kind: Playbook
  - just a string
  - kind: Playbook
    name: site
"""
    state = parse_state(text, origin="/var/lib/fleetmark/state.yaml", now=NOW)

    assert [record.name for record in state.records] == ["site"]
    assert state.errors == (
        "/var/lib/fleetmark/state.yaml: objects[0]: cannot be reported without a kind and a "
        "name: name: missing",
        "/var/lib/fleetmark/state.yaml: objects[1]: cannot be reported without a kind and a "
        "name: name: expected a string, got a boolean",
        "/var/lib/fleetmark/state.yaml: objects[2]: expected a mapping, got a string",
    )


def test_repeated_entry_is_an_error_and_the_first_is_kept() -> None:
    text = b"""\
objects:
  - {kind: Playbook, name: site, namespace: web, ready: true}
  - {kind: Playbook, name: site, namespace: db, ready: true}
  - {kind: Playbook, name: site, namespace: web, ready: false}
"""
    state = parse_state(text, origin="state.yaml", now=NOW)

    assert [(r.namespace, r.ready) for r in state.records] == [("web", True), ("db", True)]
    assert state.errors == (
        "state.yaml: objects[2]: repeats Playbook web/site of objects[0]; only the first is "
        "reported",
    )


def test_stale_file_reports_every_entry_unknown() -> None:
    text = b"""\
written_at: 2026-11-22T10:00:00Z
objects:
  - {kind: Playbook, name: site, ready: true, applied_revision: "1.2.3"}
"""
    state = parse_state(text, origin="state.yaml", now=NOW, max_age=timedelta(minutes=30))

    (record,) = state.records
    assert record.ready is None
    assert record.reason == "StateFileStale"
    assert record.health == "Unknown"
    assert record.applied_revision == "1.2.3"
    assert record.message is not None
    assert "2026-11-22T10:00:00+00:00" in record.message


def test_fresh_file_keeps_its_states() -> None:
    text = b"""\
written_at: 2026-11-22T11:45:00Z
objects:
  - {kind: Playbook, name: site, ready: true}
"""
    state = parse_state(text, origin="state.yaml", now=NOW, max_age=timedelta(minutes=30))

    assert state.records[0].ready is True

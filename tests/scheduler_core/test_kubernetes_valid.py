"""Every object the reference fleet renders is one a Kubernetes API server would take as written.

Core kinds are checked with kubernetes-validate in strict mode (an unknown field is an error);
Flux and Argo CD kinds against JSON Schemas of their CRDs kept in `tests/data/crds/` (its
README.md names the upstream project, file and version of each), which close every object so
that an unknown field, one the API server would prune, is an error there too. A kind with no
schema at all is an error, so a new template kind cannot go unchecked.
"""

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from scheduler_core.output import README_FILE
from tests.scheduler_core.test_render import FUNCTIONAL, documents, render, snapshots

# The newest Kubernetes version kubernetes-validate ships schemas for.
KUBERNETES_VERSION = "1.37"
CRDS = Path(__file__).parents[1] / "data" / "crds"


@cache
def crd_validators() -> dict[tuple[str, str], Validator]:
    """A validator for each (apiVersion, kind) in `tests/data/crds/`."""
    validators = {}
    for path in sorted(CRDS.glob("*.json")):
        schema = json.loads(path.read_text())
        # The generator's layout: `{"$ref": "#/definitions/<Kind>", "definitions": {...}}`;
        # the other JSON Schemas there are not of kinds (a promotion step's configuration).
        if "$ref" not in schema:
            continue
        validator_class = validator_for(schema)
        validator_class.check_schema(schema)
        fields = schema["definitions"][schema["$ref"].rpartition("/")[2]]["properties"]
        key = (fields["apiVersion"]["const"], fields["kind"]["const"])
        validators[key] = validator_class(schema)
    return validators


def problems(document: Mapping[str, Any]) -> list[str]:
    """What makes `document` an invalid Kubernetes object: `path: message` for each error."""
    validator = crd_validators().get((document.get("apiVersion"), document.get("kind")))
    if validator is not None:
        return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]
    try:
        kubernetes_validate.validate(dict(document), KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError as error:
        return [error.message]
    except kubernetes_validate.ValidationError as error:
        return [f"{error.json_path}: {error.message}"]
    return []


def rendered() -> dict[str, Any]:
    """Every document the reference fleet renders, by `<environment>/<file>#<index>`."""
    objects = {}
    for environment, snapshot in snapshots().items():
        for path, content in render(snapshot).apply({}).items():
            if PurePosixPath(path).name != README_FILE:
                for index, document in enumerate(documents(content)):
                    objects[f"{environment}/{path}#{index}"] = document
    return objects


def test_every_rendered_object_is_valid_kubernetes() -> None:
    objects = rendered()

    assert {(document["apiVersion"], document["kind"]) for document in objects.values()} == {
        ("v1", "Namespace"),
        ("v1", "ConfigMap"),
        ("source.toolkit.fluxcd.io/v1", "GitRepository"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization"),
        ("argoproj.io/v1alpha1", "Application"),
    }
    assert {where: problems(document) for where, document in objects.items()} == {
        where: [] for where in objects
    }


def test_an_invalid_object_is_reported() -> None:
    objects = rendered()
    config = objects[f"dev/drone/{FUNCTIONAL}/platform-config.yaml#0"]
    kustomization = objects[f"dev/drone/{FUNCTIONAL}/reconciler.yaml#1"]

    # A platform value rendered as a YAML boolean, a misspelt field, a kind with no schema.
    unquoted = {**config["data"], "SOME_COMMON_ENVIRONMENT_VARIABLE": False}
    assert problems({**config, "data": unquoted}) == [
        "$.data.SOME_COMMON_ENVIRONMENT_VARIABLE: False is not of type 'string', 'null'"
    ]
    assert problems({**kustomization, "spec": {**kustomization["spec"], "prun": True}}) == [
        "$.spec: Additional properties are not allowed ('prun' was unexpected)"
    ]
    assert problems({**kustomization, "kind": "HelmRelease"}) == [
        "Couldn't find schema for kind HelmRelease with api version"
        " kustomize.toolkit.fluxcd.io/v1 for kubernetes version 1.37"
    ]

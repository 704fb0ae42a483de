"""Validators for custom resources, made from the openAPIV3Schema of their CRDs as upstream
ships them (kept in tests/data/crds/, whose README.md names where each comes from)."""

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft4Validator

CRDS = Path(__file__).parent / "data" / "crds"


def closed(schema: Any) -> Any:
    """The schema with every object that lists its properties refusing any other, as the API
    server prunes them; an object that keeps unknown fields stays open."""
    if isinstance(schema, dict):
        schema = {key: closed(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    return schema


@cache
def crd_validators(name: str) -> dict[tuple[str, str], Draft4Validator]:
    """A validator for each (apiVersion, kind) the CRD file `name` serves."""
    crd = yaml.safe_load((CRDS / name).read_text())
    spec = crd["spec"]
    validators = {}
    for version in spec["versions"]:
        schema = closed(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
        Draft4Validator.check_schema(schema)
        api_version = f"{spec['group']}/{version['name']}"
        validators[(api_version, spec["names"]["kind"])] = Draft4Validator(schema)
    return validators

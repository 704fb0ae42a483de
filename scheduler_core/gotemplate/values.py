"""How the engine sees the Python values a template works on, in Go's terms.

Data handed to a render maps onto Go as Kalypso's data does (docs/contributing.md, "The
template engine"); nothing else of a Python object is reachable. `Walk` goes through a value
for printing, encoding and copying, bounded, and charges the render's `Meter`.
"""

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from operator import itemgetter
from typing import Final

from scheduler_core.gotemplate.meter import UNMETERED, Meter

__all__ = [
    "MAX_VALUE_DEPTH",
    "MAX_VALUE_NODES",
    "MISSING",
    "LocalMap",
    "NoValue",
    "StringMap",
    "ValueTooLarge",
    "Walk",
    "go_type_name",
    "is_struct",
    "is_true",
    "sorted_items",
    "struct_field",
    "struct_fields",
]

MAX_VALUE_DEPTH: Final = 100
MAX_VALUE_NODES: Final = 1_000_000


class NoValue:
    """Go's invalid `reflect.Value`: the result of reading a key a map does not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no value>"


MISSING: Final = NoValue()


class LocalMap(dict[object, object]):
    """A map built by the template itself (`dict`, `merge (dict) ...`, `fromJson`, ...).

    Only such maps may be changed by `set`, `unset` and `merge`: data passed in by the
    caller is shared between renders and stays read-only.
    """


class StringMap(dict[str, str]):
    """A map of strings to strings, Go's `map[string]string` (Kalypso's `.Labels` and
    `.Manifests`): `index` of a key it lacks gives "" (Go's zero string), not "<no value>".
    Reading a missing key as a field (`.Labels.absent`) gives "<no value>" for every map."""


class ValueTooLarge(Exception):
    """A value nests too deeply or expands to too many elements to be walked."""


class Walk:
    """Counts the elements a recursive walk over one value visits, charging each to `meter`."""

    __slots__ = ("meter", "nodes")

    def __init__(self, meter: Meter = UNMETERED) -> None:
        self.meter = meter
        self.nodes = 0

    def step(self, depth: int) -> None:
        self.nodes += 1
        self.meter.elements(1)
        if self.nodes > MAX_VALUE_NODES:
            raise ValueTooLarge(f"value has more than {MAX_VALUE_NODES} elements")
        if depth > MAX_VALUE_DEPTH:
            raise ValueTooLarge(f"value is nested more than {MAX_VALUE_DEPTH} levels deep")


def is_struct(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def struct_fields(value: object) -> list[tuple[str, object]]:
    """The public fields of a dataclass instance, in declaration order."""
    assert dataclasses.is_dataclass(value)
    assert not isinstance(value, type)
    return [
        (field.name, getattr(value, field.name))
        for field in dataclasses.fields(value)
        if not field.name.startswith("_")
    ]


def struct_field(value: object, name: str) -> tuple[bool, object]:
    """(found, value) of a public dataclass field; never any other attribute."""
    if name.startswith("_"):
        return False, None
    assert dataclasses.is_dataclass(value)
    assert not isinstance(value, type)
    for field in dataclasses.fields(value):
        if field.name == name:
            return True, getattr(value, name)
    return False, None


def is_true(value: object) -> bool:
    """Go's truth: false, 0, nil, "" and empty collections are false; structs are true."""
    if value is MISSING or value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | bytes | list | tuple | Mapping):
        return len(value) > 0
    return True


def go_type_name(value: object) -> str:
    """The Go type a value stands for, as Go's error messages and `%T` print it."""
    if value is None:
        return "<nil>"
    if value is MISSING:
        return "<no value>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, StringMap):
        return "map[string]string"
    if isinstance(value, Mapping):
        if all(isinstance(key, str) for key in value):
            return "map[string]interface {}"
        return "map[interface {}]interface {}"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    if isinstance(value, datetime):
        return "time.Time"
    return type(value).__name__


def _key_order(key: object) -> tuple[int, object]:
    if isinstance(key, bool):
        return (0, key)
    if isinstance(key, int | float):
        return (1, -math.inf if key != key else key)  # NaN sorts first, as in Go
    if isinstance(key, str):
        return (2, key)
    return (3, go_type_name(key))


def sorted_items(mapping: Mapping[object, object]) -> list[tuple[object, object]]:
    """A map's entries in Go's order (`range`, printing): keys sorted by type, then value."""
    if all(type(key) is str for key in mapping):  # the common case, quickly
        return sorted(mapping.items(), key=itemgetter(0))
    return sorted(mapping.items(), key=lambda item: _key_order(item[0]))

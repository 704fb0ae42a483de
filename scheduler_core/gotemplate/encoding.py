"""JSON and YAML as Go writes them: encoding/json for sprig's toJson/fromJson, and
sigs.k8s.io/yaml (JSON first, then go-yaml v2) for Kalypso's toYaml.

The output rules are in docs/scheduling.md ("Templates"). YAML is written by libyaml through
PyYAML's C emitter, the library go-yaml v2 ports, so scalar styles match.
"""

import functools
import json
import math
import re
from collections.abc import Mapping
from datetime import date, datetime

import yaml

from scheduler_core.gotemplate.gotime import format_layout
from scheduler_core.gotemplate.meter import UNMETERED, Meter
from scheduler_core.gotemplate.printf import format_float, json_float
from scheduler_core.gotemplate.values import LocalMap, Walk, go_type_name, is_struct, struct_fields

__all__ = ["YAML_NODE_UNITS", "from_json", "to_json", "to_yaml"]

# What writing one node as YAML costs beyond walking it: libyaml's emitter, and building the
# node for it, take about four times as long as a JSON element.
YAML_NODE_UNITS = 4

_RFC3339_NANO = "2006-01-02T15:04:05.999999999Z07:00"
_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def _json_string(text: str, escape_html: bool) -> str:
    out = ['"']
    for char in text:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif escape_html and char in _HTML_ESCAPES:
            out.append(_HTML_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        elif "\ud800" <= char <= "\udfff":
            out.append("\\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _json_key(key: object, walk: Walk) -> str:
    if isinstance(key, str):
        walk.meter.chars(len(key))
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise ValueError(f"json: unsupported type: map[{go_type_name(key)}]interface {{}}")


def _plain(value: object, walk: Walk, depth: int) -> object:
    """The value as encoding/json sees it: dicts with string keys, lists and scalars."""
    walk.step(depth)
    if isinstance(value, str):
        walk.meter.chars(len(value))
        return value
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"json: unsupported value: {format_float(value)}")
        return value
    if isinstance(value, datetime):
        return format_layout(value, _RFC3339_NANO)
    if isinstance(value, Mapping):
        entries = [
            (_json_key(key, walk), _plain(item, walk, depth + 1)) for key, item in value.items()
        ]
        return dict(sorted(entries, key=lambda entry: entry[0]))
    if isinstance(value, list | tuple):
        return [_plain(item, walk, depth + 1) for item in value]
    if is_struct(value):
        return {name: _plain(item, walk, depth + 1) for name, item in struct_fields(value)}
    raise ValueError(f"json: unsupported type: {go_type_name(value)}")


def _write_json(
    value: object,
    out: list[str],
    indent: str | None,
    level: int,
    escape_html: bool,
    meter: Meter,
) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(json_float(value))
    elif isinstance(value, str):
        out.append(_json_string(value, escape_html))
    else:
        is_map = isinstance(value, dict)
        assert isinstance(value, dict | list)
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        opening, closing = ("{", "}") if is_map else ("[", "]")
        if not items:
            out.append(opening + closing)
            return
        out.append(opening)
        for index, (key, item) in enumerate(items):
            if index:
                out.append(",")
            if indent is not None:
                meter.chars(len(indent) * (level + 1))
                out.append("\n" + indent * (level + 1))
            if is_map:
                out.append(_json_string(str(key), escape_html) + (": " if indent else ":"))
            _write_json(item, out, indent, level + 1, escape_html, meter)
        if indent is not None:
            meter.chars(len(indent) * level)
            out.append("\n" + indent * level)
        out.append(closing)


def to_json(
    value: object,
    *,
    indent: str | None = None,
    escape_html: bool = True,
    meter: Meter = UNMETERED,
) -> str:
    """Go's json.Marshal (or MarshalIndent with `indent`). ValueError for what Go refuses."""
    out: list[str] = []
    _write_json(_plain(value, Walk(meter), 0), out, indent, 0, escape_html, meter)
    return "".join(out)


def _reject_constant(name: str) -> float:
    raise ValueError(f"invalid character in JSON: {name}")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"json: cannot unmarshal number {text} into Go value of type float64")
    return number


def from_json(text: str, meter: Meter = UNMETERED) -> object:
    """Go's json.Unmarshal into interface{}: objects, arrays, float64, strings, bools, nil."""
    meter.chars(len(text))
    # At most one element per separator or opening bracket, charged before parsing.
    meter.elements(1 + sum(text.count(mark) for mark in ",:[{"))
    return json.loads(
        text,
        object_pairs_hook=LocalMap,
        parse_int=_finite_float,
        parse_float=_finite_float,
        parse_constant=_reject_constant,
    )


# --- YAML -------------------------------------------------------------------------------


class _Dumper(yaml.CSafeDumper):
    """libyaml's emitter, writing scalars as told: quoting is decided by go-yaml's rules below."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}  # noqa: RUF012


_STR = "tag:yaml.org,2002:str"
# What go-yaml v2 reads as booleans, null and special floats.
_RESOLVE_MAP = frozenset(
    (
        *("true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off"),
        *("OFF", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "~", "null"),
        *("Null", "NULL", "", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf"),
        *("+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF"),
    )
)
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
_GO_INT = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(
    r"[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][-+]?[0-9]+"
    r"|inf|infinity|nan)",
    re.IGNORECASE,
)
_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<m>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?:(?:[Tt](?P<h>[0-9]{1,2}):(?P<mi>[0-9]{1,2}):(?P<s>[0-9]{1,2})(?:\.[0-9]+)?"
    r"(?:Z|[-+][0-9]{2}:[0-9]{2}))"
    r"|(?: (?P<h2>[0-9]{1,2}):(?P<mi2>[0-9]{1,2}):(?P<s2>[0-9]{1,2})(?:\.[0-9]+)?))?"
)


def _is_timestamp(text: str) -> bool:
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return False
    try:
        date(int(match["y"]), int(match["m"]), int(match["d"]))
    except ValueError:
        return False
    hour, minute, second = (
        (match["h"], match["mi"], match["s"])
        if match["h"] is not None
        else (match["h2"], match["mi2"], match["s2"])
    )
    if hour is None:
        return True
    return int(hour) < 24 and int(minute) < 60 and int(second) < 60


_PYYAML = yaml.resolver.Resolver()


def _resolves_to_other_type(text: str) -> bool:
    """Whether go-yaml v2 or PyYAML would read `text`, written plain, as something but a string.

    go-yaml's rules decide what Kalypso quotes; PyYAML's (YAML 1.1, a little wider: ".0_" is a
    float to it) are added because fleetmark reads its own output back with PyYAML. Quoting
    where go-yaml would not changes no reader's value, only the text.
    """
    if _PYYAML.resolve(yaml.ScalarNode, text, (True, False)) != _STR:  # type: ignore[no-untyped-call]
        return True
    if text in _RESOLVE_MAP or _BASE60_FLOAT.fullmatch(text):
        return True
    first = text[0]
    if first == ".":
        return _GO_FLOAT.fullmatch(text) is not None
    if first in "+-0123456789":
        if _is_timestamp(text):
            return True
        plain = text.replace("_", "")
        if _GO_INT.fullmatch(plain):
            return True
        return _YAML_FLOAT.fullmatch(plain) is not None
    return False


def _key_less(left: str, right: str) -> bool:
    """go-yaml v2's order of map keys: letters by code point, digit runs by number."""
    for index in range(min(len(left), len(right))):
        a, b = left[index], right[index]
        if a == b:
            continue
        a_letter, b_letter = a.isalpha(), b.isalpha()
        if a_letter and b_letter:
            return a < b
        if a_letter or b_letter:
            return b_letter
        a_number = b_number = 0
        if a == "0" or b == "0":
            back = index - 1
            while back >= 0 and left[back].isdecimal():
                if left[back] != "0":
                    a_number = b_number = 1
                    break
                back -= 1
        a_end = index
        while a_end < len(left) and left[a_end].isdecimal():
            a_number = a_number * 10 + ord(left[a_end]) - ord("0")
            a_end += 1
        b_end = index
        while b_end < len(right) and right[b_end].isdecimal():
            b_number = b_number * 10 + ord(right[b_end]) - ord("0")
            b_end += 1
        if a_number != b_number:
            return a_number < b_number
        if a_end != b_end:
            return a_end < b_end
        return a < b
    return len(left) < len(right)


def _key_compare(left: str, right: str) -> int:
    return -1 if _key_less(left, right) else 1 if _key_less(right, left) else 0


def _yaml_number(value: float) -> str:
    # sigs.k8s.io/yaml reads the JSON text back: "1" is an integer, "1.5" and "1e+21" floats.
    text = json_float(value)
    if re.fullmatch(r"-?[0-9]+", text) and -(1 << 63) <= int(text) < 1 << 63:
        return text
    return format_float(value)


def _yaml_node(value: object, meter: Meter, depth: int) -> yaml.Node:
    # The node, and the indentation its line is written with (two spaces a level).
    meter.charge(YAML_NODE_UNITS)
    meter.chars(2 * depth)
    if isinstance(value, dict):
        # go-yaml's key order: each of n·log n comparisons made in Python, character by
        # character.
        rounds = len(value).bit_length()
        meter.elements(len(value) * rounds)
        meter.chars(sum(map(len, value)) * rounds)
        pairs = [
            (_yaml_node(key, meter, depth), _yaml_node(value[key], meter, depth + 1))
            for key in sorted(value, key=functools.cmp_to_key(_key_compare))
        ]
        return yaml.MappingNode("tag:yaml.org,2002:map", pairs, flow_style=False)
    if isinstance(value, list):
        items = [_yaml_node(item, meter, depth + 1) for item in value]
        return yaml.SequenceNode("tag:yaml.org,2002:seq", items, flow_style=False)
    if isinstance(value, str):
        style = "|" if "\n" in value else '"' if _resolves_to_other_type(value) else None
        return yaml.ScalarNode(_STR, value, style=style)
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = _yaml_number(value)
    else:
        text = str(value)
    return yaml.ScalarNode(_STR, text)


def to_yaml(value: object, meter: Meter = UNMETERED) -> str:
    """sigs.k8s.io/yaml.Marshal. ValueError for what encoding/json refuses."""
    node = _yaml_node(_plain(value, Walk(meter), 0), meter, 0)
    text: str = yaml.serialize(node, Dumper=_Dumper, allow_unicode=True)
    return text

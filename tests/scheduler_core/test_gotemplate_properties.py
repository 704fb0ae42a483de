"""Properties over random templates and data: nothing but TemplateError ever escapes, text
without actions is itself, and values survive a trip through toJson and toYaml."""

import contextlib
import json
import math
from datetime import UTC, datetime

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_core.gotemplate import Limits, Template, TemplateError

NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
SMALL = Limits(max_output_chars=20_000, max_depth=20, max_cost=80_000, max_items=500)
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that make up templates: delimiters, keywords, literals, fields, variables, functions.
PIECES = [
    "{{",
    "}}",
    "{{- ",
    " -}}",
    " ",
    "\n",
    "(",
    ")",
    "|",
    ":=",
    "=",
    ",",
    ".",
    "$",
    "$x",
    "$y",
    ".A",
    ".B",
    ".A.B",
    ".C.x",
    "if",
    "else",
    "end",
    "range",
    "with",
    "define",
    "template",
    "block",
    "break",
    "continue",
    "nil",
    "true",
    "false",
    "1",
    "-2",
    "0x1F",
    "3.5",
    "1e3",
    "'c'",
    '"s"',
    '"%d"',
    '"%v %s"',
    "`raw`",
    "/*",
    "*/",
    "printf",
    "eq",
    "ne",
    "lt",
    "index",
    "slice",
    "len",
    "and",
    "or",
    "not",
    "print",
    "default",
    "list",
    "dict",
    "until",
    "seq",
    "toYaml",
    "toJson",
    "fromJson",
    "include",
    "tpl",
    "fail",
    "required",
    "upper",
    "join",
    "split",
    "merge",
    "set",
    "indent",
    "quote",
    "now",
    "date",
    '"x"',
    "text",
    "{{/* c */}}",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
data = st.dictionaries(st.sampled_from(["A", "B", "C", "x"]), json_values, max_size=4)


@PROPERTY
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40), value=data)
def test_random_templates_fail_only_with_template_errors(pieces: list[str], value: object) -> None:
    with contextlib.suppress(TemplateError):
        Template.parse("random", "".join(pieces), limits=SMALL).render(value, now=NOW)


@PROPERTY
@given(text=st.text(max_size=200), value=data)
def test_arbitrary_text_fails_only_with_template_errors(text: str, value: object) -> None:
    with contextlib.suppress(TemplateError):
        Template.parse("random", text, limits=SMALL).render(value, now=NOW)


@PROPERTY
@given(text=st.text(max_size=200).filter(lambda text: "{{" not in text))
def test_text_without_actions_renders_to_itself(text: str) -> None:
    assert Template.parse("plain", text).render() == text


@PROPERTY
@given(
    left=st.text(alphabet=" \t\r\nab", max_size=10),
    right=st.text(alphabet=" \t\r\nab", max_size=10),
)
def test_trim_markers_remove_exactly_the_surrounding_space(left: str, right: str) -> None:
    output = Template.parse("trim", left + "{{- /* gone */ -}}" + right).render()
    assert output == left.rstrip(" \t\r\n") + right.lstrip(" \t\r\n")


@PROPERTY
@given(items=st.lists(st.text(alphabet="abc xyz", max_size=5), max_size=10))
def test_range_visits_every_element_in_order(items: list[str]) -> None:
    output = Template.parse("range", "{{ range $i, $v := . }}{{ $i }}={{ $v }};{{ end }}").render(
        items
    )
    assert output == "".join(f"{index}={item};" for index, item in enumerate(items))


@PROPERTY
@given(number=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_integers_print_as_decimal(number: int) -> None:
    assert (
        Template.parse("int", '{{ . }} {{ printf "%d" . }}').render(number) == f"{number} {number}"
    )


@PROPERTY
@given(number=st.floats(allow_nan=False, allow_infinity=False))
def test_floats_print_in_a_form_that_reads_back_to_the_same_number(number: float) -> None:
    output = Template.parse("float", "{{ . }}").render(number)
    assert float(output) == number
    assert math.copysign(1, float(output)) == math.copysign(1, number)


def same(read: object, written: object) -> bool:
    """Equal, numbers by value: Go writes 5.6e+16 as 56000000000000000, read back as an int."""
    if isinstance(read, dict) and isinstance(written, dict):
        return read.keys() == written.keys() and all(same(read[k], written[k]) for k in read)
    if isinstance(read, list) and isinstance(written, list):
        return len(read) == len(written) and all(map(same, read, written))
    if isinstance(written, float) and isinstance(read, int | float):
        return float(read) == written
    return type(read) is type(written) and read == written


@PROPERTY
@given(value=json_values)
def test_to_json_round_trips(value: object) -> None:
    output = Template.parse("json", "{{ toJson . }}").render(value)
    assert same(json.loads(output), value)


# No "=": go-yaml reads a plain "=" as a string, PyYAML's loader (used here) refuses it.
yaml_text = st.text(alphabet="abcXYZ019 .:-_/#'\"!&*?,[]{}@%`|>~+", max_size=12)
yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**12), max_value=10**12) | yaml_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(yaml_text, children, max_size=4)
    ),
    max_leaves=20,
)


@PROPERTY
@given(value=st.dictionaries(yaml_text, yaml_values, max_size=5))
def test_to_yaml_output_reads_back_as_the_same_value(value: dict[str, object]) -> None:
    output = Template.parse("yaml", "{{ toYaml . }}").render(value)
    assert yaml.safe_load(output) == (value or {})

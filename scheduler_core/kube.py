"""Kubernetes conventions the control-plane resources follow: names, labels, label selectors.

The resource models build on `KubeModel` and these types, so a document breaking a Kubernetes
rule is refused at load time, as a Kalypso control-plane API server would refuse it. Scheduling
matches with `LabelSelector.matches`; `parse_selector` reads kubectl's `-l` selectors.
"""

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "DNS1123_LABEL_MAX",
    "DnsLabel",
    "KubeModel",
    "LabelKey",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LabelValue",
    "Labels",
    "Name",
    "ObjectMeta",
    "dns1123_label_problem",
    "freeze",
    "no_labels",
    "parse_selector",
]

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")


def dns1123_label_problem(value: str) -> str | None:
    """Why `value` is not a DNS-1123 label (a namespace name), or None when it is one."""
    if len(value) > DNS1123_LABEL_MAX:
        return f"is {len(value)} characters long, more than {DNS1123_LABEL_MAX}"
    if not _DNS1123_LABEL.match(value):
        return (
            "must consist of lower-case letters, digits and '-', "
            "and start and end with a letter or digit"
        )
    return None


def _subdomain_problem(value: str) -> str | None:
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"is {len(value)} characters long, more than {DNS1123_SUBDOMAIN_MAX}"
    if not all(_DNS1123_LABEL.match(part) for part in value.split(".")):
        return (
            "must consist of lower-case letters, digits, '-' and '.', "
            "and start and end with a letter or digit"
        )
    return None


def _label_name_problem(value: str) -> str | None:
    if len(value) > DNS1123_LABEL_MAX:
        return f"is {len(value)} characters long, more than {DNS1123_LABEL_MAX}"
    if not _LABEL_NAME.match(value):
        return (
            "must consist of letters, digits, '-', '_' and '.', "
            "and start and end with a letter or digit"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    """Why `value` cannot be a label value, or None when it can (the empty value can)."""
    return None if value == "" else _label_name_problem(value)


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if "/" in key and (problem := _subdomain_problem(prefix)):
        return f"prefix {prefix!r} {problem}"
    return _label_name_problem(name)


def _checked(problem_of: Callable[[str], str | None], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if problem := problem_of(value):
            raise ValueError(f"{what} {value!r} {problem}")
        return value

    return AfterValidator(check)


def freeze(mapping: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only copy, so that a loaded resource cannot be changed behind a snapshot's back."""
    return MappingProxyType(dict(mapping))


def _valid_labels(labels: Mapping[str, str]) -> Mapping[str, str]:
    for key, value in labels.items():
        if problem := _label_key_problem(key):
            raise ValueError(f"label key {key!r} {problem}")
        if problem := _label_value_problem(value):
            raise ValueError(f"value {value!r} of label {key!r} {problem}")
    return freeze(labels)


# Read-only, and still serialised as a plain JSON object.
Labels = Annotated[Mapping[str, str], AfterValidator(_valid_labels), PlainSerializer(dict)]
Name = Annotated[str, _checked(_subdomain_problem, "name")]
DnsLabel = Annotated[str, _checked(dns1123_label_problem, "name")]
LabelKey = Annotated[str, _checked(_label_key_problem, "label key")]
LabelValue = Annotated[str, _checked(_label_value_problem, "label value")]


def no_labels() -> Mapping[str, str]:
    return freeze({})


class KubeModel(BaseModel):
    """Frozen, camelCase on the wire, unknown fields ignored (the API server prunes them).

    A field written as null counts as absent, as it does for a Kubernetes object: `labels:`
    with nothing after it is no labels, and a required field left null is missing.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class ObjectMeta(KubeModel):
    name: Name
    labels: Labels = Field(default_factory=no_labels)


Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


class LabelSelectorRequirement(KubeModel):
    key: LabelKey
    operator: Operator
    values: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> Self:
        takes_values = self.operator in ("In", "NotIn")
        if takes_values and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if not takes_values and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case "In":
                return labels.get(self.key) in self.values
            case "NotIn":
                return labels.get(self.key) not in self.values
            case "Exists":
                return self.key in labels
            case "DoesNotExist":
                return self.key not in labels


class LabelSelector(KubeModel):
    """Kubernetes' label selector: every `matchLabels` pair and every expression must hold.

    The empty selector `{}` matches everything. A missing or null selector is not a selector
    at all: the resource models require one, as Kalypso's CRDs do.
    """

    match_labels: Labels = Field(default_factory=no_labels)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels.items()) and all(
            expression.matches(labels) for expression in self.match_expressions
        )


# One requirement of a selector as kubectl's `-l` reads it, and the comma after it.
_REQUIREMENT = re.compile(
    r"""\s*(?:
        !\s*(?P<absent>[^\s,!=()]+)
      | (?P<key>[^\s,!=()]+)\s*(?:
            (?P<equality>==|=|!=)\s*(?P<value>[^\s,!=()]*)
          | (?P<set>notin|in)\s*\((?P<values>[^()]*)\)
        )?
    )\s*(?:,|\Z)""",
    re.VERBOSE,
)
_OPERATORS: dict[str | None, Operator] = {
    "=": "In",
    "==": "In",
    "!=": "NotIn",
    "in": "In",
    "notin": "NotIn",
    None: "Exists",
}


def parse_selector(text: str) -> LabelSelector:
    """A label selector written as kubectl's `-l` takes it: comma-separated requirements
    `key=value` (or `==`), `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` (it exists)
    and `!key` (it does not). The empty text selects everything. ValueError says what it cannot
    read."""
    requirements: list[LabelSelectorRequirement] = []
    position = 0
    while position < len(text) and text[position:].strip():
        found = _REQUIREMENT.match(text, position)
        if found is None:
            raise ValueError(
                f"cannot read {text[position:].strip()!r}: expected key=value, key!=value, "
                "key in (a,b), key notin (a,b), key or !key, separated by commas"
            )
        position = found.end()
        key = found["absent"] or found["key"]
        if problem := _label_key_problem(key):
            raise ValueError(f"label key {key!r} {problem}")
        if found["absent"]:
            operator: Operator = "DoesNotExist"
            values: tuple[str, ...] = ()
        else:
            operator = _OPERATORS[found["equality"] or found["set"]]
            if found["set"]:
                values = tuple(value.strip() for value in found["values"].split(","))
            else:
                values = () if found["equality"] is None else (found["value"],)
            if found["set"] and values == ("",):
                raise ValueError(f"{key} {found['set']} (): give at least one value")
        for value in values:
            if problem := _label_value_problem(value):
                raise ValueError(f"value {value!r} of label {key!r} {problem}")
        requirements.append(LabelSelectorRequirement(key=key, operator=operator, values=values))
    return LabelSelector(match_expressions=tuple(requirements))

"""A render's cost is bounded, not only its steps: the work one function call does (elements
touched, characters read and written) is charged to the render's meter, and with a caller's
clock the render ends at its deadline, inside one long call too."""

from datetime import UTC, datetime

import pytest
import yaml

from scheduler_core.gotemplate import LimitExceeded, Limits, Meter, Template, TemplateError
from scheduler_core.gotemplate.functions import default_functions
from tests.scheduler_core.test_gotemplate_kalypso import (
    ARC_FLUX,
    ARC_FLUX_BY_USE_CASE,
    ARGOCD,
    CONFIGMAP,
    FUNCTIONAL_ON_DRONE,
    NAMESPACE,
    PERFORMANCE_ON_LARGE,
    UAT_ON_SMALL,
)

NOW = datetime(2024, 3, 5, 14, 7, 9, tzinfo=UTC)
BUDGET = Limits().max_cost
# The sort loop of the issue: it ran for over a minute under a budget of steps alone.
SORT_LOOP = "{{$l := until 100000}}{{range until 2000}}{{$_ := sortAlpha $l}}{{end}}"


class Timer:
    """A monotonic clock that moves on by `tick` seconds every time it is read."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.now = 100.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.tick
        return self.now


def limit_error(text: str, meter: Meter | None = None) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as caught:
        Template.parse("t", text).render({}, now=NOW, meter=meter)
    return caught.value


def test_the_sort_loop_of_the_issue_stops_on_its_budget() -> None:
    error = limit_error(SORT_LOOP)

    assert str(error) == (
        'template: t:1:50: executing "t" at <sortAlpha $l>: error calling sortAlpha: '
        f"exceeded the budget of {BUDGET} cost units (evaluation steps, elements touched, "
        "characters read or written)"
    )
    assert error.line == 1


@pytest.mark.parametrize(
    ("function", "text"),
    [
        ("repeat", '{{ $s := repeat 100000 "x" }}{{ range until 1000 }}{{ $_ := repeat 10 $s }}'),
        ("join", '{{ $l := until 100000 }}{{ range until 1000 }}{{ $_ := join "," $l }}'),
        # 300 x 300 appends, each copying the list so far: four billion elements copied.
        (
            "append",
            "{{ $l := list }}{{ range until 300 }}{{ range until 300 }}"
            "{{ $l = append $l 1 }}{{ end }}",
        ),
        ("printf", '{{ range until 1000 }}{{ $_ := printf "%0*d" 1000000 1 }}'),
        ("printf", '{{ range until 1000 }}{{ $_ := printf "%.1000000f" 1.5 }}'),
        # Ten lists of the one before, six times over: ten million elements to write.
        (
            "toYaml",
            "{{ $l := list 1 2 3 4 5 6 7 8 9 10 }}{{ range until 6 }}"
            "{{ $l = list $l $l $l $l $l $l $l $l $l $l }}{{ end }}{{ $_ := toYaml $l }}",
        ),
    ],
)
def test_the_variations_of_the_issue_stop_on_the_default_budget(function: str, text: str) -> None:
    error = limit_error(close(text))

    assert f"error calling {function}: exceeded the budget of {BUDGET} cost units" in str(error)


@pytest.mark.parametrize(
    ("function", "text"),
    [
        ("toJson", "{{ $l := until 30000 }}{{ range until 1000 }}{{ $_ := toJson $l }}"),
        (
            "fromJson",
            "{{ $s := toJson (until 10000) }}{{ range until 1000 }}{{ $_ := fromJson $s }}",
        ),
        ("deepCopy", "{{ $l := until 10000 }}{{ range until 1000 }}{{ $_ := deepCopy $l }}"),
        ("print", "{{ $l := until 30000 }}{{ range until 1000 }}{{ $_ := print $l }}"),
        ("sortAlpha", "{{ $l := until 10000 }}{{ range until 1000 }}{{ $_ := sortAlpha $l }}"),
        ("uniq", "{{ $_ := uniq (until 5000) }}"),
        ("has", "{{ $l := until 10000 }}{{ range until 1000 }}{{ $_ := has -1 $l }}"),
        ("without", "{{ $_ := without (until 10000) 1 2 3 4 5 6 7 8 9 10 11 12 }}"),
        ("concat", "{{ $l := until 10000 }}{{ range until 1000 }}{{ $_ := concat $l $l }}"),
        (
            "replace",
            '{{ $s := repeat 100000 "ab" }}{{ range until 1000 }}{{ $_ := replace "a" "b" $s }}',
        ),
        ("upper", '{{ $s := repeat 200000 "a" }}{{ range until 1000 }}{{ $_ := upper $s }}'),
        (
            "contains",
            '{{ $s := repeat 200000 "a" }}{{ range until 1000 }}{{ $_ := contains "b" $s }}',
        ),
        (
            "sha256sum",
            '{{ $s := repeat 200000 "a" }}{{ range until 1000 }}{{ $_ := sha256sum $s }}',
        ),
        (
            "trimAll",
            '{{ $s := repeat 200000 "a" }}{{ range until 1000 }}{{ $_ := trimAll "b" $s }}',
        ),
        ("date", '{{ $l := repeat 50000 "2006" }}{{ $_ := date $l now }}'),
        ("tpl", '{{ $_ := tpl (repeat 2000 "{{ 1 }}") . }}'),
        (
            "keys",
            "{{ $d := dict }}{{ range $i := until 2000 }}"
            "{{ $_ := set $d (toString $i) 1 }}{{ end }}{{ range until 1000 }}{{ $_ := keys $d }}",
        ),
        (
            "stringify",
            "{{ $d := dict }}{{ range $i := until 2000 }}{{ $_ := set $d (toString $i) (list 1) }}"
            "{{ end }}{{ range until 1000 }}{{ $_ := stringify $d }}",
        ),
    ],
)
def test_every_costly_function_charges_its_work(function: str, text: str) -> None:
    meter = Meter(BUDGET // 10)

    error = limit_error(close(text), meter)

    assert f"error calling {function}: exceeded the budget of {meter.budget} cost units" in str(
        error
    )


def close(text: str) -> str:
    """`text` with the `range` it leaves open ended."""
    return text + "{{ end }}" * (text.count("{{ range") - text.count("{{ end }}"))


def test_a_budget_error_names_the_included_template_it_happened_in() -> None:
    text = (
        '{{ define "slow" }}{{ range until 1000 }}{{ end }}{{ end }}'
        '{{ range until 1000 }}{{ include "slow" . }}{{ end }}'
    )

    error = limit_error(text)

    assert error.executing == "slow"
    assert "exceeded the budget" in error.detail


def test_renders_sharing_a_meter_share_its_budget() -> None:
    template = Template.parse("t", "{{ range until 100 }}{{ end }}")
    alone = Meter(BUDGET)
    template.render(meter=alone)
    meter = Meter(2 * alone.spent + 1)

    template.render(meter=meter)
    template.render(meter=meter)
    with pytest.raises(LimitExceeded, match=f"exceeded the budget of {meter.budget} cost units"):
        template.render(meter=meter)
    # Spent, the meter refuses any more work, however little.
    with pytest.raises(LimitExceeded):
        Template.parse("u", "x").render(meter=meter)
    assert meter.exhausted is not None


def test_regular_expressions_are_not_offered_at_all() -> None:
    # sprig's regex functions could be made to backtrack for ever: they are left out.
    with pytest.raises(TemplateError, match='function "regexReplaceAll" not defined'):
        Template.parse("t", '{{ regexReplaceAll "a+" (repeat 100000 "a") "b" }}')


def test_a_deadline_ends_a_render_that_is_within_its_budget() -> None:
    timer = Timer(tick=0.5)
    meter = Meter(10 * BUDGET, clock=timer, timeout=2.0)

    error = limit_error("{{ range 100000 }}{{ end }}", meter)

    assert str(error).endswith("exceeded the time limit of 2 seconds")
    # Read when the meter was made, then every thousand units, not at every step: at 101,
    # 101.5, 102, 102.5 and, past the deadline of 102.5, at 103.
    assert timer.readings == 6
    assert meter.spent < 10_000


def test_a_deadline_ends_one_long_call_in_its_middle() -> None:
    timer = Timer(tick=0.25)
    meter = Meter(BUDGET, clock=timer, timeout=2.0)
    text = "{{ $l := until 50000 }}{{ $_ := toYaml $l }}"
    Template.parse("t", text).render()  # within the budget, without a deadline

    error = limit_error(text, meter)

    assert "at <toYaml $l>: error calling toYaml: exceeded the time limit of 2 seconds" in str(
        error
    )
    assert meter.spent < 100_000  # long before the list of 50000 was written


def test_a_render_ending_in_time_never_sees_its_deadline() -> None:
    timer = Timer(tick=1.0)
    meter = Meter(BUDGET, clock=timer, timeout=2.0)

    assert Template.parse("t", "{{ range until 10 }}.{{ end }}").render(meter=meter) == "." * 10
    assert timer.readings == 1  # when the meter was made


def test_a_meter_takes_a_clock_and_a_timeout_together() -> None:
    with pytest.raises(ValueError, match="clock and timeout"):
        Meter(BUDGET, clock=Timer(1.0))
    with pytest.raises(ValueError, match="positive"):
        Meter(BUDGET, clock=Timer(1.0), timeout=0)


@pytest.mark.parametrize(
    ("resource", "data"),
    [
        (ARC_FLUX, FUNCTIONAL_ON_DRONE),
        (ARC_FLUX_BY_USE_CASE, UAT_ON_SMALL),
        (ARGOCD, PERFORMANCE_ON_LARGE),
        (NAMESPACE, FUNCTIONAL_ON_DRONE),
        (CONFIGMAP, PERFORMANCE_ON_LARGE),
    ],
)
def test_kalypsos_templates_spend_a_small_part_of_the_budget(
    resource: str, data: dict[str, object]
) -> None:
    meter = Meter(BUDGET // 500)
    for text in yaml.safe_load(resource)["spec"]["manifests"]:
        Template.parse("kalypso", text).render(data, meter=meter)
    assert meter.spent < BUDGET // 500


# Functions that take no CallContext, so charge nothing beyond what the executor charges for
# every call (a step, the text of its string arguments and of its string result): their work
# is constant or lies in that text. Every other function charges its own work.
UNMETERED = {
    # Go's builtins
    *("and", "or", "not", "eq", "ne", "lt", "le", "gt", "ge", "len"),
    # defaults and flow
    *("default", "empty", "coalesce", "ternary", "required", "fail"),
    # strings, each read or written once
    *("upper", "lower", "title", "trim", "trimAll", "trimPrefix", "trimSuffix", "nospace"),
    *("contains", "hasPrefix", "hasSuffix", "substr", "trunc", "unquote"),
    *("b64enc", "b64dec", "sha256sum", "sha1sum"),
    # maps and lists, one element
    *("get", "set", "unset", "hasKey", "first", "last"),
    # numbers
    *("int", "int64", "float64", "atoi", "add", "add1", "sub", "mul", "div", "mod", "max", "min"),
}


def test_every_other_function_charges_its_own_work() -> None:
    functions = default_functions()

    assert {name for name, function in functions.items() if not function.needs_context} == (
        UNMETERED
    )

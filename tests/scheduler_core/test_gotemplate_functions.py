"""sprig's, Helm's and Kalypso's functions as templates use them; guard rails; what a template
cannot reach or change."""

import copy
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
import yaml

from scheduler_core.gotemplate import Limits, Template, TemplateError

NOW = datetime(2024, 3, 5, 14, 7, 9, 123000, tzinfo=UTC)


@dataclass
class Point:
    x: int
    y: int


DATA = {
    "Items": ["a", "b", "c"],
    "Nested": {"inner": {"value": 7}},
    "Config": {"port": 8080, "debug": True, "name": "x", "tags": ["a"], "none": None, "ratio": 0.5},
    "Point": Point(1, 2),
    "Json": {"b": [1, 2.5, None], "a": "<&>", "c": True},
    "Nan": float("nan"),
}


def render(text: str, data: object = None, **options: object) -> str:
    limits = options.pop("limits", None)
    assert limits is None or isinstance(limits, Limits)
    return Template.parse("t", text, limits=limits).render(data, now=NOW)


def render_error(text: str, data: object = None, **options: object) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        render(text, data, **options)
    return caught.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # defaults and flow
        ('{{ default "d" "" }} {{ default "d" "x" }} {{ .Missing | default "d" }}', "d x d"),
        ('{{ default 5 0 }} {{ default "d" false }} {{ default "d" .Items }}', "5 d [a b c]"),
        (
            '{{ empty "" }} {{ empty 0 }} {{ empty (list) }} {{ empty .Point }} {{ empty "a" }}',
            "true true true false false",
        ),
        ('{{ coalesce "" 0 "x" "y" }} {{ coalesce "" 0 }}', "x <no value>"),
        (
            '{{ ternary "y" "n" true }} {{ ternary "y" "n" false }} {{ true | ternary "y" "n" }}',
            "y n y",
        ),
        ('{{ required "need it" "v" }}', "v"),
        # strings
        ('{{ quote "a\\"b" 1 nil }} {{ squote "a" 2 }}', '"a\\"b" "1" \'a\' \'2\''),
        (
            '{{ upper "abc" }} {{ lower "ABC" }} {{ title "hello wOrld-x_y" }}',
            "ABC abc Hello WOrld-X_y",
        ),
        ('[{{ trim "  x \\n" }}] {{ nospace " a b\\tc " }}', "[x] abc"),
        (
            '{{ trimPrefix "v" "v1.2" }} {{ trimSuffix ".yaml" "a.yaml" }} {{ trimAll "$" "$5$" }}',
            "1.2 a 5",
        ),
        ('{{ replace "-" "_" "a-b-c" }} {{ "a.b" | replace "." "/" }}', "a_b_c a/b"),
        (
            '{{ contains "ell" "hello" }} {{ hasPrefix "he" "hello" }} {{ hasSuffix "lo" '
            '"hello" }} {{ "hello" | contains "x" }}',
            "true true true false",
        ),
        ('{{ $p := split "/" "a/b/c" }}{{ $p._1 }} {{ $p }}', "b map[_0:a _1:b _2:c]"),
        ('{{ splitList "," "a,b,,c" }} {{ splitList "" "abc" }}', "[a b  c] [a b c]"),
        (
            '{{ join "," .Items }} {{ join "-" (list 1 nil "x") }} {{ join "," "solo" }}',
            "a,b,c 1-x solo",
        ),
        ('{{ indent 2 "a\\nb" }}|{{ nindent 4 "x" }}', "  a\n  b|\n    x"),
        (
            '{{ repeat 3 "ab" }} {{ substr 1 3 "hello" }} {{ trunc 3 "hello" }} {{ trunc -2 '
            '"hello" }}',
            "ababab el hel lo",
        ),
        (
            '{{ cat "a" 1 nil "b" }} {{ toString 5 | printf "%T" }} {{ toStrings (list 1 "a") }}',
            "a 1 b string [1 a]",
        ),
        # encoding
        ("{{ toJson .Json }}", '{"a":"\\u003c\\u0026\\u003e","b":[1,2.5,null],"c":true}'),
        ('{{ toRawJson (dict "a" "<b>") }} {{ toJson .Nan }}|', '{"a":"<b>"} |'),
        (
            '{{ toPrettyJson (dict "a" (list 1) "e" (dict)) }}',
            '{\n  "a": [\n    1\n  ],\n  "e": {}\n}',
        ),
        (
            '{{ $j := fromJson "{\\"a\\": 1, \\"b\\": [true]}" }}{{ $j.a }} {{ printf "%T" '
            "$j.a }} {{ $j.b }}",
            "1 float64 [true]",
        ),
        ('{{ fromJson "not json" }}', "<no value>"),
        (
            '{{ b64enc "hello" }} {{ b64dec "aGVsbG8=" }} {{ b64dec "a!" }}',
            "aGVsbG8= hello illegal base64 data at input byte 1",
        ),
        (
            '{{ sha256sum "abc" }}',
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        # maps
        (
            '{{ $d := dict "b" 2 "a" 1 }}{{ get $d "a" }} [{{ get $d "z" }}] {{ hasKey $d "b" '
            "}} {{ keys $d }} {{ values $d }}",
            "1 [] true [a b] [1 2]",
        ),
        ('{{ dict "k" }} {{ dict 1 2 }}', "map[k:] map[1:2]"),
        (
            '{{ $d := dict "a" 1 }}{{ $_ := set $d "b" 2 }}{{ $_ := unset $d "a" }}{{ $d }}',
            "map[b:2]",
        ),
        (
            '{{ pick (dict "a" 1 "b" 2) "a" "z" }} {{ omit (dict "a" 1 "b" 2) "a" }}',
            "map[a:1] map[b:2]",
        ),
        (
            '{{ merge (dict "a" 1 "e" "" "n" (dict "x" 1)) (dict "a" 2 "b" 2 "e" "y" "n" (dict '
            '"y" 2)) }}',
            "map[a:1 b:2 e:y n:map[x:1 y:2]]",
        ),
        (
            '{{ mergeOverwrite (dict "a" 1 "k" true "n" (dict "x" 1)) (dict "a" 2 "k" false '
            '"n" (dict "y" 2)) }}',
            "map[a:2 k:false n:map[x:1 y:2]]",
        ),
        (
            '{{ $c := deepCopy .Nested }}{{ $_ := set $c.inner "value" 8 }}{{ $c.inner.value '
            "}} {{ .Nested.inner.value }}",
            "8 7",
        ),
        # lists
        (
            "{{ first .Items }} {{ last .Items }} {{ rest .Items }} {{ initial .Items }}",
            "a c [b c] [a b]",
        ),
        (
            '{{ append .Items "d" }} {{ prepend .Items "z" }} {{ concat .Items (list 1) }} {{ '
            "reverse .Items }}",
            "[a b c d] [z a b c] [a b c 1] [c b a]",
        ),
        (
            '{{ uniq (list 1 2 1 "1") }} {{ compact (list 0 1 "" "a" nil) }} {{ without .Items '
            '"b" }}',
            "[1 2 1] [1 a] [a c]",
        ),
        (
            '{{ has "b" .Items }} {{ has 1 (list "1") }} {{ sortAlpha (list "b" "C" "a") }}',
            "true false [C a b]",
        ),
        ("{{ until 3 }} {{ until -2 }} {{ untilStep 0 10 3 }}", "[0 1 2] [0 -1] [0 3 6 9]"),
        (
            "{{ seq 3 }}|{{ seq 2 5 }}|{{ seq 5 2 }}|{{ seq 0 2 6 }}|{{ seq 0 }}",
            "1 2 3|2 3 4 5|5 4 3 2|0 2 4 6|1 0",
        ),
        # numbers
        (
            '{{ int "42" }} {{ int "0x10" }} {{ int "3.0" }} {{ int "x" }} {{ int 3.9 }} {{ '
            "int64 true }}",
            "42 16 3 0 3 1",
        ),
        ('{{ float64 "2.5" }} {{ float64 3 }} {{ atoi "12" }} {{ atoi "1.5" }}', "2.5 3 12 0"),
        (
            "{{ add 1 2 3 }} {{ add1 5 }} {{ sub 5 7 }} {{ mul 2 3 4 }} {{ max 1 5 3 }} {{ min "
            "4 2 }}",
            "6 6 -2 24 5 2",
        ),
        ("{{ div 7 2 }} {{ div -7 2 }} {{ mod 7 3 }} {{ mod -7 3 }}", "3 -3 1 -1"),
        ("{{ add 9223372036854775807 1 }}", "-9223372036854775808"),
        # time from the injected clock
        ('{{ now | date "2006-01-02 15:04:05 MST Mon Jan" }}', "2024-03-05 14:07:09 UTC Tue Mar"),
        ('{{ now | date "Monday, 2 January 2006 3:04PM" }}', "Tuesday, 5 March 2024 2:07PM"),
        ('{{ now | date "15:04:05.000|.999|.000000|002" }}', "14:07:09.123|.123|.123000|065"),
        (
            '{{ date "02/01/06 03:04:05 Z07:00" 0 }} {{ date "2006" "not a time" }}',
            "01/01/70 12:00:00 Z 2024",
        ),
        # templates from templates
        ('{{ define "x" }}inc {{ . }}{{ end }}{{ include "x" "d" | upper }}', "INC D"),
        ('{{ define "d" }}D{{ end }}{{ tpl "{{ template \\"d\\" }}-{{ . }}" "v" }}', "D-v"),
        # Kalypso's functions
        (
            '{{ unquote "\\"a\\\\tb\\"" }}|{{ unquote "plain" }}|{{ unquote "\'x\'" }}',
            "a\tb|plain|x",
        ),
        ('{{ hash "abc" }}', hashlib.sha256(b"abc").hexdigest()),
        ('{{ hash (dict "b" 1 "a" 2) }}', hashlib.sha256(b'{"a":2,"b":1}').hexdigest()),
        ('{{ toYaml "plain" }}|{{ toYaml (list) }}|{{ toYaml .Nan }}|', "plain|[]||"),
    ],
)
def test_function(text: str, expected: str) -> None:
    assert render(text, DATA) == expected


def test_to_yaml_writes_as_go_yaml_does() -> None:
    value = {
        "b10": "x",
        "b2": "true",
        "a": {"port": "8080", "empty": "", "date": "2024-01-02", "colon": "a: b", "on": "on"},
        "list": [1, 2.0, 0.5, None, True, {"k": "v"}],
        "multi": "line one\nline two\n",
        "url": "mysql://host:3306/db",
        "none": {},
    }
    expected = (
        "a:\n"
        "  colon: 'a: b'\n"
        '  date: "2024-01-02"\n'
        '  empty: ""\n'
        '  "on": "on"\n'
        '  port: "8080"\n'
        'b2: "true"\n'
        "b10: x\n"
        "list:\n"
        "- 1\n"
        "- 2\n"
        "- 0.5\n"
        "- null\n"
        "- true\n"
        "- k: v\n"
        "multi: |\n"
        "  line one\n"
        "  line two\n"
        "none: {}\n"
        "url: mysql://host:3306/db"
    )
    output = render("{{ toYaml . }}", value)
    assert output == expected
    assert yaml.safe_load(output) == {**value, "list": [1, 2, 0.5, None, True, {"k": "v"}]}


def test_stringify_gives_config_map_data_that_stays_strings() -> None:
    output = render("data:\n{{ toYaml (stringify .Config) | indent 2 }}", DATA)
    assert yaml.safe_load(output) == {
        "data": {
            "port": "8080",
            "debug": "true",
            "name": "x",
            "tags": '["a"]',
            "none": "",
            "ratio": "0.5",
        }
    }


def test_dates_keep_the_zone_of_the_clock() -> None:
    east = datetime(2024, 3, 5, 23, 30, tzinfo=timezone(timedelta(hours=2)))
    template = Template.parse("t", '{{ now | date "2006-01-02T15:04:05-07:00 MST" }} {{ now }}')
    assert (
        template.render(now=east)
        == "2024-03-05T23:30:00+02:00 +0200 2024-03-05 23:30:00 +0200 +0200"
    )


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ('{{ required "need x" .Missing }}', "error calling required: need x"),
        ('{{ fail "stop here" }}', "error calling fail: stop here"),
        ("{{ div 1 0 }}", "error calling div: runtime error: integer divide by zero"),
        ('{{ first "abc" }}', "error calling first: Cannot find first on type string"),
        ("{{ concat (list 1) 2 }}", "error calling concat: Cannot concat type int as list"),
        ('{{ substr 2 9 "abc" }}', "abc"),
        ('{{ repeat -1 "x" }}', "error calling repeat: strings: negative Repeat count"),
        ('{{ set .Nested "k" 1 }}', "error calling set: set can't change a map passed in as data"),
        (
            '{{ merge .Nested (dict "k" 1) }}',
            "error calling merge: merge can't change a map passed in as data",
        ),
        ('{{ include "nope" . }}', 'error calling include: template "nope" not defined'),
        ('{{ tpl "{{ .A" . }}', "error calling tpl: template: tpl:1:0: unclosed action"),
    ],
)
def test_function_errors(text: str, detail: str) -> None:
    if detail == "abc":  # sprig's substr takes an end past the string as "to the end"
        assert render(text, DATA) == "c"
        return
    assert detail in str(render_error(text, DATA))


def test_now_without_a_clock_is_an_error_not_the_system_time() -> None:
    template = Template.parse("t", "{{ now }}")
    with pytest.raises(
        TemplateError, match=r"error calling now: no clock: the render was given no `now`"
    ):
        template.render()
    with pytest.raises(TemplateError, match="no clock"):
        Template.parse("t", '{{ date "2006" "x" }}').render()


def test_data_passed_in_is_never_changed() -> None:
    data = copy.deepcopy(DATA)
    text = (
        '{{ $m := merge (dict) .Nested }}{{ $_ := set $m.inner "value" 99 }}'
        '{{ $o := mergeOverwrite (dict) .Config (dict "port" 1) }}'
        '{{ $l := append .Items "d" }}{{ $m.inner.value }} {{ $o.port }} {{ len $l }}'
    )
    assert render(text, data) == "99 1 4"
    assert data == {**DATA, "Nan": data["Nan"]}


def test_caller_functions_are_callable_and_their_errors_are_template_errors() -> None:
    def double(value: int) -> int:
        return value * 2

    def joined(*parts: object) -> str:
        return "+".join(map(str, parts))

    def broken(value: object) -> object:
        raise ValueError(f"cannot handle {value}")

    functions = {"double": double, "joined": joined, "broken": broken}
    template = Template.parse(
        "t", '{{ double 21 }} {{ joined 1 "a" }} {{ call .fn 4 }}', functions=functions
    )
    assert template.render({"fn": double}) == "42 1+a 8"

    failing = Template.parse("t", '{{ broken "x" }}', functions=functions)
    with pytest.raises(
        TemplateError, match='at <broken "x">: error calling broken: cannot handle x'
    ):
        failing.render()


def test_call_only_calls_functions_the_caller_registered() -> None:
    template = Template.parse("t", "{{ call .fn 1 }}", functions={"inc": lambda x: x + 1})
    with pytest.raises(TemplateError, match="error calling call: non-function of type function"):
        template.render({"fn": lambda x: x})
    with pytest.raises(TemplateError, match="error calling call: call of nil"):
        template.render({})


def test_a_caller_function_with_a_bad_name_is_refused() -> None:
    with pytest.raises(TemplateError, match="function name '1x' is not a valid identifier"):
        Template.parse("t", "x", functions={"1x": str})


@pytest.mark.parametrize("name", ["env", "expandenv", "getHostByName", "readFile", "exec"])
def test_no_function_reaches_the_environment_files_or_network(name: str) -> None:
    with pytest.raises(TemplateError, match=f'function "{name}" not defined'):
        Template.parse("t", f'{{{{ {name} "HOME" }}}}')


def test_python_internals_are_out_of_reach() -> None:
    assert render("{{ .__class__ }} {{ .__init__ }}", DATA) == "<no value> <no value>"
    error = render_error("{{ .Point.__dict__ }}", DATA)
    assert error.detail == "can't evaluate field __dict__ in type Point"
    error = render_error("{{ .Items.__len__ }}", DATA)
    assert error.detail == "can't evaluate field __len__ in type []interface {}"


@pytest.mark.parametrize(
    ("text", "limits", "detail"),
    [
        (
            "{{ range until 50 }}abcd{{ end }}",
            Limits(max_output_chars=100),
            "output exceeds the limit of 100 characters",
        ),
        (
            '{{ define "r" }}{{ template "r" . }}{{ end }}{{ template "r" . }}',
            Limits(),
            "exceeded maximum template depth (64)",
        ),
        (
            '{{ tpl "{{ tpl . . }}" "{{ tpl . . }}" }}',
            Limits(max_depth=10),
            "exceeded maximum template depth (10)",
        ),
        ("{{ until 1000000000 }}", Limits(), "1000000000 numbers is more than the limit of 100000"),
        ("{{ seq 1 1000000000 }}", Limits(), "1000000000 numbers is more than the limit of 100000"),
        (
            "{{ range until 5000 }}{{ end }}",
            Limits(max_cost=1000),
            "exceeded the budget of 1000 cost units",
        ),
        (
            '{{ repeat 1000000000 "x" }}',
            Limits(),
            "the repeated text would be 1000000000 characters",
        ),
        (
            '{{ indent 1000000000 "x" }}',
            Limits(),
            "the indented text would be 1000000001 characters",
        ),
        (
            '{{ $s := "x" }}{{ range until 40 }}{{ $s = printf "%s%s" $s $s }}{{ end }}',
            Limits(max_output_chars=1000),
            "printf returned 1024 characters, more than the limit of 1000",
        ),
        (
            "{{ $l := list }}{{ range until 200 }}{{ $l = list $l }}{{ end }}{{ $l }}",
            Limits(),
            "value is nested more than 100 levels deep",
        ),
        (
            "{{ " + "(" * 100 + "1" + ")" * 100 + " }}",
            Limits(),
            "blocks and parentheses nest more than 64 levels deep",
        ),
    ],
)
def test_guard_rails_stop_runaway_templates(text: str, limits: Limits, detail: str) -> None:
    error = render_error(text, limits=limits)
    assert detail in str(error)
    assert str(error).count("error calling tpl") <= 1


def test_data_that_refers_to_itself_cannot_hang_printing() -> None:
    loop: dict[str, object] = {}
    loop["self"] = loop
    for text in ("{{ . }}", "{{ toJson . }}", "{{ toYaml . }}", "{{ deepCopy . }}"):
        assert "nested more than 100 levels deep" in str(render_error(text, loop))

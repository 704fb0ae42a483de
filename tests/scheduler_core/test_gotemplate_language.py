"""Go text/template semantics: each case is a template, its data and what Go renders.

Expected outputs follow Go's documented behaviour (text/template, fmt): trimming, literals,
fields and missing keys, variables and their scopes, control structures, builtins,
comparisons, printing of values, printf verbs, and the errors Go reports with their place.
"""

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from scheduler_core.gotemplate import Template, TemplateError


@dataclass
class Server:
    name: str
    port: int
    _secret: str = "hidden"
    tags: list[str] = field(default_factory=list)

    def address(self) -> str:
        return f"{self.name}:{self.port}"


def render(text: str, data: object = None) -> str:
    return Template.parse("t", text).render(data)


def render_error(text: str, data: object = None) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        render(text, data)
    return caught.value


DATA = {
    "Name": "app",
    "Items": ["a", "b", "c"],
    "Empty": [],
    "Ports": {"http": 80, "https": 443},
    "Nested": {"inner": {"value": 7}},
    "Nil": None,
    "Server": Server("web", 8080, tags=["x"]),
    "Zero": 0,
    "Float": 2.5,
    "Yes": True,
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # text, actions, trimming and comments
        ("plain text", "plain text"),
        ("a {{ .Name }} b", "a app b"),
        ("a  {{- .Name -}}  b", "aappb"),
        ("a\n\t {{- .Name }}\n", "aapp\n"),
        ("{{ .Name }}\n{{- .Name }}", "appapp"),
        ("x {{/* a comment */}} y", "x  y"),
        ("x {{- /* trimmed comment */ -}} y", "xy"),
        ("{{-3}}", "-3"),
        ("a {{- 3}}", "a3"),
        # literals
        ('{{ "tab\\there" }}', "tab\there"),
        ('{{ "\\u00e9\\x41\\101" }}', "éAA"),
        ("{{ `raw\\n` }}", "raw\\n"),
        ("{{ 'a' }} {{ '\\n' }}", "97 10"),
        ("{{ 0x1F }} {{ 0o17 }} {{ 017 }} {{ 0b101 }} {{ 1_000 }}", "31 15 15 5 1000"),
        (
            "{{ 1.5 }} {{ .5 }} {{ 1.5e3 }} {{ 1e6 }} {{ 0x1p4 }} {{ -2.25 }}",
            "1.5 0.5 1500 1e+06 16 -2.25",
        ),
        ("{{ true }} {{ false }} {{ print nil }}", "true false <nil>"),
        # fields, map keys, missing keys
        ("{{ .Nested.inner.value }}", "7"),
        ("{{ .Missing }}", "<no value>"),
        ("{{ .Missing.deeper.still }}", "<no value>"),
        ("{{ .Nil }}", "<no value>"),
        ("{{ .Ports.http }}", "80"),
        ("{{ .Server.name }}:{{ .Server.port }}", "web:8080"),
        ("{{ .Server }}", "{web 8080 [x]}"),
        ('{{ (index .Items 1) }} {{ (dict "a" (dict "b" 5)).a.b }}', "b 5"),
        ("{{ $s := .Server }}{{ $s.name }}", "web"),
        ("{{ range .Items }}{{ $.Name }}{{ end }}", "appappapp"),
        (
            "{{ . }}",
            "map[Empty:[] Float:2.5 Items:[a b c] Name:app Nested:map[inner:map[value:7]] "
            "Nil:<nil> Ports:map[http:80 https:443] Server:{web 8080 [x]} Yes:true Zero:0]",
        ),
        # pipelines and parentheses
        ('{{ .Name | printf "%s-%s" "x" }}', "x-app"),
        ('{{ "a" | printf "%s%s" "b" | printf "[%s]" }}', "[ba]"),
        ("{{ len (slice .Items 1) }}", "2"),
        # variables
        ("{{ $x := 1 }}{{ $x }}", "1"),
        ("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", "2"),
        ("{{ $x := 1 }}{{ if true }}{{ $x := 3 }}{{ $x }}{{ end }}{{ $x }}", "31"),
        ("{{ $ := 5 }}{{ $ }}", "5"),
        ("{{ with $v := .Name }}{{ $v }}{{ end }}", "app"),
        # if / else if / else and truth
        ("{{ if .Yes }}y{{ else }}n{{ end }}", "y"),
        ("{{ if .Zero }}a{{ else if .Empty }}b{{ else if .Name }}c{{ else }}d{{ end }}", "c"),
        ("{{ if .Float }}t{{ end }}{{ if .Nil }}nil{{ end }}{{ if .Missing }}m{{ end }}", "t"),
        ("{{ if .Server }}struct{{ end }}{{ if .Ports }}map{{ end }}", "structmap"),
        ('{{ if "" }}a{{ else }}b{{ end }}{{ if 0.0 }}c{{ else }}d{{ end }}', "bd"),
        # range
        ("{{ range .Items }}[{{ . }}]{{ end }}", "[a][b][c]"),
        ("{{ range $i, $v := .Items }}{{ $i }}{{ $v }} {{ end }}", "0a 1b 2c "),
        ("{{ range $v := .Items }}{{ $v }}{{ end }}", "abc"),
        ("{{ range $k, $v := .Ports }}{{ $k }}={{ $v }};{{ end }}", "http=80;https=443;"),
        ("{{ range .Empty }}x{{ else }}none{{ end }}", "none"),
        ("{{ range .Nil }}x{{ else }}nil{{ end }}", "nil"),
        ("{{ range .Missing }}x{{ else }}missing{{ end }}", "missing"),
        ("{{ range 3 }}{{ . }}{{ end }}", "012"),
        ("{{ range $i := 2 }}{{ $i }}{{ end }}{{ range 0 }}x{{ else }}zero{{ end }}", "01zero"),
        ('{{ range .Items }}{{ if eq . "b" }}{{ continue }}{{ end }}{{ . }}{{ end }}', "ac"),
        ('{{ range .Items }}{{ if eq . "b" }}{{ break }}{{ end }}{{ . }}{{ end }}', "a"),
        (
            "{{ $i := 0 }}{{ $v := 0 }}{{ range $i, $v = .Items }}{{ end }}{{ $i }}{{ $v }}",
            "2c",
        ),
        # with / else with / else
        ("{{ with .Nested.inner }}{{ .value }}{{ end }}", "7"),
        ("{{ with .Missing }}x{{ else with .Name }}{{ . }}{{ else }}z{{ end }}", "app"),
        ("{{ with .Zero }}x{{ else with .Empty }}y{{ else }}z{{ end }}", "z"),
        # define, template, block
        ('{{ define "x" }}<{{ . }}>{{ end }}{{ template "x" .Name }}', "<app>"),
        ('{{ define "x" }}<{{ . }}>{{ end }}{{ template "x" }}', "<<no value>>"),
        ('{{ define "x" }}{{ $ }}{{ end }}{{ template "x" 5 }}', "5"),
        ('{{ block "b" .Name }}default {{ . }}{{ end }}', "default app"),
        # and, or, not: short-circuit, returning an operand
        ('{{ and 1 "x" }} {{ and 0 "x" }} {{ or "" 0 }} {{ or "" "y" }}', "x 0 0 y"),
        ('{{ and false (fail "never") }} {{ or true (fail "never") }}', "false true"),
        ('{{ "v" | and 1 }} {{ and .Missing "x" }}', "v <no value>"),
        ('{{ not "" }} {{ not .Items }}', "true false"),
        # comparisons
        ('{{ eq "a" "b" "c" "a" }} {{ eq 1 1 }} {{ eq 1 2 }}', "true true false"),
        ('{{ eq .Missing "x" }} {{ eq nil nil }} {{ eq .Nil nil }}', "false true true"),
        (
            '{{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt 2.5 1.5 }} {{ ge "a" "b" }}',
            "true true true true false",
        ),
        ('{{ lt "abc" "abd" }}', "true"),
        # len, index, slice
        ('{{ len "héllo" }} {{ len .Items }} {{ len .Ports }}', "6 3 2"),
        ('{{ index "abc" 1 }} {{ index .Items 2 }} {{ index .Nested "inner" "value" }}', "98 c 7"),
        ('{{ index .Ports "ftp" }}', "<no value>"),
        ('{{ slice "hello" 1 3 }} {{ slice .Items 1 }} {{ slice .Items 0 1 2 }}', "el [b c] [a]"),
        # print, println, escapers
        ('{{ print 1 2 "a" "b" 3 }}', "1 2ab3"),
        ('{{ println "a" 1 }}', "a 1\n"),
        ("{{ html \"<a href='x'>&</a>\" }}", "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"),
        ('{{ js "it\'s <b>=" }}', "it\\'s \\u003Cb\\u003E\\u003D"),
        ('{{ urlquery "a b&c=d/é" }}', "a+b%26c%3Dd%2F%C3%A9"),
        # how values print
        (
            "{{ .Float }} {{ 0.1 }} {{ 100000.0 }} {{ 1234567.0 }} {{ 1e21 }}",
            "2.5 0.1 100000 1.234567e+06 1e+21",
        ),
        ('{{ list 1 "a" nil (list 2) (dict "k" "v") }}', "[1 a <nil> [2] map[k:v]]"),
        ('{{ dict "b" 2 "a" 1 "c" (list) }}', "map[a:1 b:2 c:[]]"),
    ],
)
def test_go_behaviour(text: str, expected: str) -> None:
    assert render(text, DATA) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{{ printf "%s|%d|%v|%t" "s" 42 1.5 true }}', "s|42|1.5|true"),
        ('{{ printf "%5d|%-5d|%05d|%+d" 42 42 42 5 }}', "   42|42   |00042|+5"),
        ('{{ printf "%x %X %o %O %b %#x" 255 255 8 8 5 255 }}', "ff FF 10 0o10 101 0xff"),
        ('{{ printf "%c %U %#U %q" 65 65 65 65 }}', "A U+0041 U+0041 'A' 'A'"),
        ('{{ printf "%q" "a\\"b\\n" }}', '"a\\"b\\n"'),
        (
            '{{ printf "%f|%.2f|%8.3f|%-8.1f|" 1.0 3.14159 3.14159 2.25 }}',
            "1.000000|3.14|   3.142|2.2     |",
        ),
        (
            '{{ printf "%08.3f %+.1e %e %g %G" -3.14159 12345.678 1234.5678 0.00001234 1e-7 }}',
            "-003.142 +1.2e+04 1.234568e+03 1.234e-05 1E-07",
        ),
        (
            '{{ printf "%5s|%-5s|%.2s|%x|% x" "ab" "ab" "abcdef" "hi" "hi" }}',
            "   ab|ab   |ab|6869|68 69",
        ),
        ('{{ printf "%v %d %s" .Items (list 1 2) .Items }}', "[a b c] [1 2] [a b c]"),
        ('{{ printf "%d" .Ports }}', "map[%!d(string=http):80 %!d(string=https):443]"),
        ('{{ printf "%+v" .Server }}', "{name:web port:8080 tags:[x]}"),
        (
            '{{ printf "%T %T %T %T %T" 1 1.5 "s" .Items .Ports }}',
            "int float64 string []interface {} map[string]interface {}",
        ),
        ('{{ printf "%d%%" 50 }}', "50%"),
        ('{{ printf "%*d|%-*d|" 5 42 4 7 }}', "   42|7   |"),
        ('{{ printf "%d %d" 1 }}', "1 %!d(MISSING)"),
        ('{{ printf "%d" 1 2 "x" }}', "1%!(EXTRA int=2, string=x)"),
        ('{{ printf "%d|%s|%t" "x" 5 1 }}', "%!d(string=x)|%!s(int=5)|%!t(int=1)"),
        ('{{ printf "%v %v %d" nil .Missing nil }}', "<nil> <nil> %!d(<nil>)"),
        ('{{ printf "%z" 1 }}', "%!z(int=1)"),
        ('{{ printf "100%" }}', "100%!(NOVERB)"),
        ('{{ printf "%v %v" 1e6 -0.0 }}', "1e+06 -0"),
    ],
)
def test_printf_follows_go_fmt(text: str, expected: str) -> None:
    assert render(text, DATA) == expected


def test_block_is_replaced_by_a_later_definition_and_not_by_an_empty_one() -> None:
    template = Template.parse("main", '{{ block "greeting" . }}hello {{ . }}{{ end }}!')
    assert template.render("you") == "hello you!"
    template.add("blank", '{{ define "greeting" }}   {{ end }}')
    assert template.render("you") == "hello you!"
    template.add("override", '{{ define "greeting" }}hi {{ . }}{{ end }}')
    assert template.render("you") == "hi you!"
    assert template.names == ("blank", "greeting", "main", "override")


def test_templates_of_one_set_call_each_other_and_render_by_name() -> None:
    template = Template.parse("a", '{{ template "b" .X }}')
    template.add("b", "b={{ . }}")
    assert template.render({"X": 1}) == "b=1"
    assert template.render(2, name="b") == "b=2"
    assert template.name == "a"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{ .Name", "template: t:1:0: unclosed action"),
        ("x {{ .Name )}}", "template: t:1:11: unexpected right paren"),
        ("line one\n{{ nope 1 }}", 'template: t:2:3: function "nope" not defined'),
        ("{{ if .A }}\nx", "template: t:2:1: unexpected EOF"),
        ("a\n\n  {{ end }}", "template: t:3:5: unexpected {{end}}"),
        ("{{ else }}", "template: t:1:3: unexpected {{else}}"),
        (
            "{{ if true }}{{ $x := 1 }}{{ end }}{{ $x }}",
            'template: t:1:38: undefined variable "$x"',
        ),
        (
            '{{ $x := 1 }}{{ define "d" }}{{ $x }}{{ end }}',
            'template: t:1:32: undefined variable "$x"',
        ),
        ('{{ "open }}', "template: t:1:3: unterminated quoted string"),
        ("{{ 3x }}", 'template: t:1:3: bad number syntax: "3x"'),
        ("{{ 09 }}", 'template: t:1:3: integer overflow: "09"'),
        ("{{ 99999999999999999999 }}", 'template: t:1:3: integer overflow: "99999999999999999999"'),
        ("{{ .Name | 1 }}", "template: t:1:11: non executable command in pipeline stage 2"),
        ('{{ "a".b }}', 'template: t:1:6: unexpected . after term "\\"a\\""'),
        ("{{ break }}", "template: t:1:3: {{break}} outside {{range}}"),
        (
            "{{ range .Items }}{{ else }}{{ continue }}{{ end }}",
            "template: t:1:31: {{continue}} outside {{range}}",
        ),
        ("{{ /* late comment */ }}", 'template: t:1:3: unexpected "/" in command'),
        ("{{/* open", "template: t:1:0: unclosed comment"),
        (
            '{{ define "d" }}1{{ end }}{{ define "d" }}2{{ end }}',
            'template: t:1:36: multiple definition of template "d"',
        ),
        ("{{ if }}", "template: t:1:6: missing value for if"),
        ("{{ 1i }}", "template: t:1:3: complex number 1i is not supported"),
        ("{{ $x, $y := 1 }}", "template: t:1:3: too many declarations in command"),
    ],
)
def test_parse_errors_name_line_and_column(text: str, message: str) -> None:
    error = render_error(text)
    assert str(error) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a\n{{ .Nil.field }}",
            'template: t:2:7: executing "t" at <.Nil.field>: nil pointer evaluating interface '
            "{}.field",
        ),
        (
            "{{ index .Items 3 }}",
            'template: t:1:3: executing "t" at <index .Items 3>: error calling index: index '
            "out of range: 3",
        ),
        (
            '{{ template "nope" }}',
            'template: t:1:12: executing "t" at <{{template "nope"}}>: template "nope" not defined',
        ),
        (
            "{{ range .Name }}{{ end }}",
            'template: t:1:9: executing "t" at <.Name>: range can\'t iterate over app',
        ),
        (
            "{{ range $i, $v := 3 }}{{ end }}",
            'template: t:1:19: executing "t" at <3>: can\'t use 3 to iterate over more than '
            "one variable",
        ),
        (
            '{{ define "inner" }}\n  {{ fail "boom" }}{{ end }}{{ template "inner" }}',
            'template: t:2:5: executing "inner" at <fail "boom">: error calling fail: boom',
        ),
        ("{{ upper 1 }}", 'template: t:1:9: executing "t" at <1>: expected string; found 1'),
        (
            "{{ .Missing | upper }}",
            'template: t:1:14: executing "t" at <upper>: invalid value; expected string',
        ),
        (
            "{{ upper .Zero }}",
            'template: t:1:9: executing "t" at <.Zero>: wrong type for value; expected string; '
            "got int",
        ),
        ("{{ upper nil }}", 'template: t:1:9: executing "t" at <nil>: cannot assign nil to string'),
        (
            "{{ printf }}",
            'template: t:1:3: executing "t" at <printf>: wrong number of args for printf: want '
            "at least 1 got 0",
        ),
        (
            '{{ upper "a" "b" }}',
            'template: t:1:3: executing "t" at <upper>: wrong number of args for upper: want 1 '
            "got 2",
        ),
        (
            '{{ eq 1 "a" }}',
            'template: t:1:3: executing "t" at <eq 1 "a">: error calling eq: incompatible '
            "types for comparison: int and string",
        ),
        (
            "{{ eq 1 1.0 }}",
            'template: t:1:3: executing "t" at <eq 1 1.0>: error calling eq: incompatible '
            "types for comparison: int and float64",
        ),
        (
            "{{ lt true false }}",
            'template: t:1:3: executing "t" at <lt true false>: error calling lt: invalid type '
            "for comparison",
        ),
        (
            "{{ eq .Items .Items }}",
            'template: t:1:3: executing "t" at <eq .Items .Items>: error calling eq: '
            "non-comparable type [a b c]: []interface {}",
        ),
        (
            "{{ eq }}",
            'template: t:1:3: executing "t" at <eq>: wrong number of args for eq: want at '
            "least 1 got 0",
        ),
        (
            "{{ eq 1 }}",
            'template: t:1:3: executing "t" at <eq 1>: error calling eq: missing argument for '
            "comparison",
        ),
        (
            "{{ len 3 }}",
            'template: t:1:3: executing "t" at <len 3>: error calling len: len of type int',
        ),
        (
            "{{ slice .Items 2 1 }}",
            'template: t:1:3: executing "t" at <slice .Items 2 1>: error calling slice: '
            "invalid slice index: 2 > 1",
        ),
        ("{{ nil }}", 'template: t:1:3: executing "t" at <nil>: nil is not a command'),
        (
            '{{ "x" 1 }}',
            'template: t:1:3: executing "t" at <"x">: can\'t give argument to non-function "x"',
        ),
        (
            "{{ .Name 1 }}",
            'template: t:1:3: executing "t" at <.Name>: Name is not a method but has arguments',
        ),
        (
            "{{ .Server.address }}",
            'template: t:1:10: executing "t" at <.Server.address>: can\'t evaluate field '
            "address in type Server",
        ),
        (
            "{{ .Server._secret }}",
            'template: t:1:10: executing "t" at <.Server._secret>: can\'t evaluate field '
            "_secret in type Server",
        ),
        (
            "{{ .Name.length }}",
            'template: t:1:8: executing "t" at <.Name.length>: can\'t evaluate field length in '
            "type string",
        ),
    ],
)
def test_execution_errors_name_template_line_column_and_action(text: str, message: str) -> None:
    error = render_error(text, DATA)
    assert str(error) == message


def test_error_attributes_locate_the_failure() -> None:
    error = render_error("ok\n  {{ .Nil.x }}", DATA)
    assert (error.name, error.line, error.column, error.executing) == ("t", 2, 9, "t")
    assert error.detail == "nil pointer evaluating interface {}.x"


def test_an_error_in_an_included_template_is_reported_through_the_include() -> None:
    text = '{{ define "inner" }}{{ .Nil.x }}{{ end }}{{ include "inner" . }}'
    error = render_error(text, DATA)
    assert str(error) == (
        'template: t:1:44: executing "t" at <include "inner" .>: error calling include: '
        'template: t:1:27: executing "inner" at <.Nil.x>: nil pointer evaluating interface {}.x'
    )


def test_rendering_an_unknown_template_name_fails() -> None:
    template = Template.parse("t", "x")
    with pytest.raises(TemplateError, match='no template "other" associated with template "t"'):
        template.render(name="other")


def test_a_naive_clock_is_refused() -> None:
    template = Template.parse("t", "{{ now }}")
    with pytest.raises(TemplateError, match="now must be a timezone-aware datetime"):
        template.render(now=datetime(2024, 1, 1))


def test_times_print_as_go_prints_them() -> None:
    moment = datetime(2024, 3, 5, 14, 7, 9, 120000, tzinfo=UTC)
    assert render("{{ . }}", moment) == "2024-03-05 14:07:09.12 +0000 UTC"

"""The expansion of a panel's SQL, against the cases of Grafana's own tests and source.

The macro and comment cases are those of grafana/grafana
pkg/tsdb/grafana-postgresql-datasource/macros_test.go at commit
446b3e1f13300e6160905e8e1c7c39fcab9aa084 (TestMacroEngine, TestInterpolateSQLCommenter,
TestStripSQLComments), each input with the expansion that test expects.
"""

import re
from datetime import UTC, datetime, timedelta

import pytest

from tests.dashboards.grafana_sql import Variable, expand, interval_for, strip_comments
from tests.dashboards.panels import PanelQuery, opened, panel_queries

END = datetime(2017, 4, 21, 5, 6, 17, tzinfo=UTC)
START = END - timedelta(minutes=5)
SERVERS = Variable(["test1", "o'neil"], options=["test1", "o'neil", "test3"])


def run(sql: str, timescaledb: bool = False, **variables: Variable) -> str:
    return expand(sql, variables=variables, time_from=START, time_to=END, timescaledb=timescaledb)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("${servers:sqlstring}", "'test1','o''neil'"),
        ("${servers:csv}", "test1,o'neil"),
        ("${servers:singlequote}", "'test1','o\\'neil'"),
        # The datasource's own format: a multi-value variable's values quoted.
        ("$servers", "'test1','o''neil'"),
        ("${servers}", "'test1','o''neil'"),
    ],
)
def test_variable_formats(sql: str, expected: str) -> None:
    assert run(sql, servers=SERVERS) == expected


def test_sqlstring_escapes_a_double_quote_as_the_scenes_formatter_does() -> None:
    quoted = Variable(['say "hi"', "it's"])
    assert run("${v:sqlstring}", v=quoted) == "'say \\\"hi\\\"','it''s'"
    # The datasource's own format and csv leave a double quote alone.
    assert run("$v ${v:csv}", v=quoted) == "'say \"hi\"','it''s' say \"hi\",it's"


def test_a_single_value_variable_is_escaped_not_quoted() -> None:
    single = Variable(["o'neil"], multi=False, include_all=False)
    assert run("name = '$name'", name=single) == "name = 'o''neil'"


def test_all_is_every_option_or_the_custom_all_value_as_it_is() -> None:
    every = Variable(None, options=["a", "b'c"])
    custom = Variable(None, all_value="'*'", options=["a", "b'c"])
    assert run("${s:sqlstring} ${s:csv}", s=every) == "'a','b''c' a,b'c"
    assert run("${s:sqlstring} ${s:csv} $s", s=custom) == "'*' '*' '*'"


# TestMacroEngine: 2018-04-12 18:00 to 18:05 UTC.
FROM = datetime(2018, 4, 12, 18, 0, tzinfo=UTC)
TO = FROM + timedelta(minutes=5)
FIVE_MINUTES = "floor(extract(epoch from time_column)/300)*300"
MACRO_CASES = [
    ("select $__time(time_column)", 'select time_column AS "time"'),
    ("select min($__time(time_column))", 'select min(time_column AS "time")'),
    (
        "WHERE $__timeFilter(time_column)",
        "WHERE time_column BETWEEN '2018-04-12T18:00:00Z' AND '2018-04-12T18:05:00Z'",
    ),
    ("select $__timeFrom()", "select '2018-04-12T18:00:00Z'"),
    ("select $__timeTo()", "select '2018-04-12T18:05:00Z'"),
    # Pre-5.3 compatibility: a comma right after $__timeGroup adds the alias.
    ("SELECT $__timeGroup(time_column,'5m'), value", f'SELECT {FIVE_MINUTES} AS "time", value'),
    (
        "SELECT $__timeGroup(time_column,'5m') as time, value",
        f"SELECT {FIVE_MINUTES} as time, value",
    ),
    ("SELECT $__timeGroup(time_column,'5m')", f"SELECT {FIVE_MINUTES}"),
    ("SELECT $__timeGroupAlias(time_column,'5m')", f'SELECT {FIVE_MINUTES} AS "time"'),
    ("$__timeGroup(time_column , '5m')", FIVE_MINUTES),
    ("$__timeGroupAlias(time_column , '5m')", f'{FIVE_MINUTES} AS "time"'),
    ("select $__unixEpochFilter(time)", "select time >= 1523556000 AND time <= 1523556300"),
    (
        "select $__unixEpochNanoFilter(time)",
        "select time >= 1523556000000000000 AND time <= 1523556300000000000",
    ),
    ("select $__unixEpochNanoFrom()", "select 1523556000000000000"),
    ("select $__unixEpochNanoTo()", "select 1523556300000000000"),
    (
        "SELECT $__unixEpochGroup(time_column+time_adjustment,'5m')",
        "SELECT floor((time_column+time_adjustment)/300)*300",
    ),
    (
        "SELECT $__unixEpochGroupAlias(time_column+time_adjustment,'5m')",
        'SELECT floor((time_column+time_adjustment)/300)*300 AS "time"',
    ),
]
TIMESCALEDB_CASES = [
    ("GROUP BY $__timeGroup(time_column,'5m')", "GROUP BY time_bucket('300.000s',time_column)"),
    ("GROUP BY $__timeGroup(time_column , '5m')", "GROUP BY time_bucket('300.000s',time_column)"),
    (
        "GROUP BY $__timeGroup(time_column , '12d')",
        "GROUP BY time_bucket('1036800.000s',time_column)",
    ),
    ("GROUP BY $__timeGroup(time_column , '20ms')", "GROUP BY time_bucket('0.020s',time_column)"),
]
# Ranges before 1970 and with half seconds.
RANGE_CASES = [
    (
        datetime(1960, 2, 1, 7, tzinfo=UTC),
        datetime(1965, 2, 3, 8, tzinfo=UTC),
        "time_column BETWEEN '1960-02-01T07:00:00Z' AND '1965-02-03T08:00:00Z'",
        "time >= -312915600 AND time <= -154886400",
        "time >= -312915600000000000 AND time <= -154886400000000000",
    ),
    (
        datetime(1960, 2, 1, 7, tzinfo=UTC),
        datetime(1980, 2, 3, 8, tzinfo=UTC),
        "time_column BETWEEN '1960-02-01T07:00:00Z' AND '1980-02-03T08:00:00Z'",
        "time >= -312915600 AND time <= 318412800",
        "time >= -312915600000000000 AND time <= 318412800000000000",
    ),
    (
        datetime(1960, 2, 1, 7, 0, 0, 500_000, tzinfo=UTC),
        datetime(1980, 2, 3, 8, 0, 0, 500_000, tzinfo=UTC),
        "time_column BETWEEN '1960-02-01T07:00:00.5Z' AND '1980-02-03T08:00:00.5Z'",
        "time >= -312915600 AND time <= 318412800",
        "time >= -312915599500000000 AND time <= 318412800500000000",
    ),
]


def grafana(sql: str, timescaledb: bool = False) -> str:
    return expand(sql, variables={}, time_from=FROM, time_to=TO, timescaledb=timescaledb)


@pytest.mark.parametrize(("sql", "expected"), MACRO_CASES)
def test_grafanas_macro_cases(sql: str, expected: str) -> None:
    assert grafana(sql) == expected


@pytest.mark.parametrize(("sql", "expected"), TIMESCALEDB_CASES)
def test_grafanas_timescaledb_cases(sql: str, expected: str) -> None:
    assert grafana(sql, timescaledb=True) == expected


@pytest.mark.parametrize(("start", "end", "between", "epoch", "nano"), RANGE_CASES)
def test_grafanas_range_cases(
    start: datetime, end: datetime, between: str, epoch: str, nano: str
) -> None:
    sql = "$__timeFilter(time_column)|$__unixEpochFilter(time)|$__unixEpochNanoFilter(time)"
    expanded = expand(sql, variables={}, time_from=start, time_to=end)
    assert expanded.split("|") == [between, epoch, nano]


def test_the_group_interval_is_written_as_go_writes_a_float() -> None:
    assert grafana("$__timeGroup(t, 12d)") == "floor(extract(epoch from t)/1.0368e+06)*1.0368e+06"
    assert grafana("$__timeGroup(t, 1h30m)") == "floor(extract(epoch from t)/5400)*5400"
    assert grafana("$__timeGroup(t, 20ms)") == "floor(extract(epoch from t)/0.02)*0.02"


# TestInterpolateSQLCommenter, with the 10m interval as the panel's minimum interval.
@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "SELECT $__interval /*app='grafana',source='bi'*/",
            "SELECT 10m /*app='grafana',source='bi'*/",
        ),
        # The browser has put the interval in before the server strips comments.
        ("SELECT 1 /*i='$__interval'*/", "SELECT 1 /*i='10m'*/"),
        ("SELECT 1 /*k='$__timeFilter(t'*/ WHERE (x = 1)", "SELECT 1  WHERE (x = 1)"),
    ],
)
def test_grafanas_sqlcommenter_cases(sql: str, expected: str) -> None:
    expanded = expand(sql, variables={}, time_from=FROM, time_to=TO, min_interval="10m")
    assert expanded == expected


# TestStripSQLComments.
TAG = "/*application='grafana',source='bi',route='test',feature='repro'*/"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1 -- a comment", "SELECT 1 "),
        ("SELECT /* a comment */ 1", "SELECT  1"),
        ("SELECT /*\n  multiline\n  comment\n*/ 1", "SELECT  1"),
        ("SELECT '-- not a comment' AS label", "SELECT '-- not a comment' AS label"),
        ("SELECT '/* not a comment */' AS label", "SELECT '/* not a comment */' AS label"),
        ('SELECT "col -- name" FROM t', 'SELECT "col -- name" FROM t'),
        ('SELECT "col /* name */" FROM t', 'SELECT "col /* name */" FROM t'),
        ("SELECT 'it''s fine -- not a comment' AS v", "SELECT 'it''s fine -- not a comment' AS v"),
        ('SELECT "col ""-- name""" FROM t', 'SELECT "col ""-- name""" FROM t'),
        ("SELECT '-- in string' AS a -- real comment", "SELECT '-- in string' AS a "),
        ("SELECT '/* in string */' AS a /* real comment */", "SELECT '/* in string */' AS a "),
        ("SELECT col FROM t WHERE col > 1", "SELECT col FROM t WHERE col > 1"),
        ("SELECT 1 -- comment\nFROM t", "SELECT 1 \nFROM t"),
        ("SELECT $$ -- not a comment $$", "SELECT $$ -- not a comment $$"),
        ("SELECT $$ /* not a comment */ $$", "SELECT $$ /* not a comment */ $$"),
        ("SELECT $body$ -- not a comment $body$", "SELECT $body$ -- not a comment $body$"),
        ("SELECT $__timeFrom() -- comment", "SELECT $__timeFrom() "),
        ("SELECT $1 -- comment", "SELECT $1 "),
        (f"SELECT 1 AS value\n{TAG};", f"SELECT 1 AS value\n{TAG};"),
        (
            "SELECT 1 /*application='grafana',feature='panel'*/",
            "SELECT 1 /*application='grafana',feature='panel'*/",
        ),
        ("SELECT 1 /*range='$__timeFilter(t)'*/", "SELECT 1 "),
        ("SELECT 1 /*i='$__interval'*/", "SELECT 1 "),
    ],
)
def test_grafanas_comment_cases(sql: str, expected: str) -> None:
    assert strip_comments(sql) == expected


def test_a_macro_in_a_comment_is_not_expanded() -> None:
    assert run("SELECT 1 -- $__timeGroup(t)\n/* $__nothing(x) */") == "SELECT 1 \n"


@pytest.mark.parametrize(
    ("days", "points", "interval", "text"),
    [
        (1, 500, timedelta(minutes=2), "2m"),
        (1, 1800, timedelta(minutes=1), "1m"),
        (7, 500, timedelta(minutes=20), "20m"),
        (7, 1800, timedelta(minutes=5), "5m"),
        (30, 500, timedelta(hours=1), "1h"),
        (30, 1800, timedelta(minutes=20), "20m"),
        (90, 500, timedelta(hours=3), "3h"),
        (90, 1800, timedelta(hours=1), "1h"),
        (365, 500, timedelta(hours=12), "12h"),
        (365, 1800, timedelta(hours=6), "6h"),
    ],
)
def test_the_interval_follows_the_range_and_the_panels_width(
    days: int, points: int, interval: timedelta, text: str
) -> None:
    start = END - timedelta(days=days)
    assert interval_for(start, END, points) == interval
    sql = "$__interval $__interval_ms $__timeGroup(t, $__interval)"
    seconds = f"{interval.total_seconds():g}"
    assert expand(sql, variables={}, time_from=start, time_to=END, max_data_points=points) == (
        f"{text} {interval // timedelta(milliseconds=1)} "
        f"floor(extract(epoch from t)/{seconds})*{seconds}"
    )


def test_the_interval_is_no_finer_than_the_panels_or_the_datasources_minimum() -> None:
    hour = END - timedelta(hours=1)
    # 1 hour over 1,800 points rounds to 2s; the datasource's minimum is 1m.
    assert interval_for(hour, END, 1800) == timedelta(minutes=1)
    assert interval_for(hour, END, 1800, "1s") == timedelta(seconds=2)
    assert interval_for(END - timedelta(days=1), END, 500, "1h") == timedelta(hours=1)
    # Past three weeks per point Grafana jumps to 30 days, then to a year.
    assert interval_for(END - timedelta(days=3650), END, 100) == timedelta(days=30)
    assert interval_for(END - timedelta(days=36500), END, 100) == timedelta(days=365)
    # Two weeks per point is a week, written as days.
    weeks = expand(
        "$__interval",
        variables={},
        time_from=END - timedelta(days=700),
        time_to=END,
        max_data_points=100,
    )
    assert weeks == "7d"


# "1,5" makes four arguments, and Grafana reads a fill only from the third of exactly three.
@pytest.mark.parametrize(
    "fill", ["NULL", "previous", "0", "-1.5", "1e3", ".5", "+Inf", "NaN", "0x1p-2", "1,5"]
)
def test_fill_values_grafana_reads(fill: str) -> None:
    assert run(f"$__timeGroupAlias(t, 1h, {fill})") == (
        'floor(extract(epoch from t)/3600)*3600 AS "time"'
    )


@pytest.mark.parametrize("fill", ["null", "Previous", "zero", "1_000", "1e400", "+NaN", "''"])
def test_fill_values_grafana_refuses(fill: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"error parsing fill value {fill}")):
        run(f"$__timeGroup(t, 1h, {fill})")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("$__timeGroup(t)", "macro __timeGroup needs time column and interval"),
        ("$__timeGroup(t, 1x)", "error parsing interval 1x"),
        ("$__timeGroup(t, '0s')", "interval must be positive, got '0s'"),
        ("$__timeGroupAlias(t, -5m)", "interval must be positive, got -5m"),
    ],
)
def test_bad_group_arguments_are_refused_as_grafana_refuses_them(sql: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run(sql)


@pytest.mark.parametrize("name", ["__unknownMacro", "__timefilter", "cluster"])
def test_unknown_macros_are_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=f'unknown macro "{name}"'):
        run(f"SELECT ${name}(t)")


@pytest.mark.parametrize("query", panel_queries(), ids=lambda query: query.key)
def test_every_panel_expands_at_every_width_and_range(query: PanelQuery) -> None:
    """Grafana accepts each panel's SQL (macros known, fills and intervals it reads) on a
    narrow and a wide screen, from a day to a year, with and without TimescaleDB."""
    for screen in (500, 1800):
        for days in (1, 30, 90, 365):
            for timescaledb in (False, True):
                expanded = expand(
                    query.query.raw_sql,
                    variables=opened(query.dashboard, first=lambda _: "drone-01"),
                    time_from=END - timedelta(days=days),
                    time_to=END,
                    max_data_points=query.max_data_points(screen),
                    min_interval=query.panel.interval,
                    timescaledb=timescaledb,
                )
                assert "$__" not in expanded, expanded

"""The expansion of a panel's SQL, against the examples of Grafana's documentation."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.dashboards.grafana_sql import Variable, expand, interval_for

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


def test_a_single_value_variable_is_escaped_not_quoted() -> None:
    single = Variable(["o'neil"], multi=False, include_all=False)
    assert run("name = '$name'", name=single) == "name = 'o''neil'"


def test_all_is_every_option_or_the_custom_all_value_as_it_is() -> None:
    every = Variable(None, options=["a", "b'c"])
    custom = Variable(None, all_value="'*'", options=["a", "b'c"])
    assert run("${s:sqlstring} ${s:csv}", s=every) == "'a','b''c' a,b'c"
    assert run("${s:sqlstring} ${s:csv} $s", s=custom) == "'*' '*' '*'"


def test_time_macros() -> None:
    assert run("WHERE $__timeFilter(t)") == (
        "WHERE t BETWEEN '2017-04-21T05:01:17Z' AND '2017-04-21T05:06:17Z'"
    )
    assert run("$__timeFrom() $__timeTo()") == "'2017-04-21T05:01:17Z' '2017-04-21T05:06:17Z'"
    assert run("$__timeGroup(t, '5m')") == "floor(extract(epoch from t)/300)*300"
    assert run("$__timeGroupAlias(t, 5m, NULL)") == 'floor(extract(epoch from t)/300)*300 AS "time"'
    assert run("$__timeGroupAlias(t, '1h')", timescaledb=True) == (
        "time_bucket('3600.000s',t) AS \"time\""
    )


def test_interval_follows_the_range_and_the_panels_minimum() -> None:
    day = END - timedelta(days=1)
    assert interval_for(day, END, 1000, None) == timedelta(minutes=1)
    assert interval_for(day, END, 1000, "1h") == timedelta(hours=1)
    assert interval_for(END - timedelta(days=30), END, 1000, None) == timedelta(minutes=30)
    assert interval_for(END - timedelta(days=90), END, 100, None) == timedelta(hours=12)
    sql = "$__timeGroupAlias(t, $__interval) $__interval_ms"
    expanded = expand(sql, variables={}, time_from=day, time_to=END, min_interval="1h")
    assert expanded == 'floor(extract(epoch from t)/3600)*3600 AS "time" 3600000'


def test_unknown_macros_are_refused() -> None:
    with pytest.raises(ValueError, match="__unixEpochFilter"):
        run("$__unixEpochFilter(t)")

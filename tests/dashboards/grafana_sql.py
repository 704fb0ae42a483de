"""What Grafana does to a panel's SQL before its PostgreSQL datasource runs it, so that tests
and benchmarks run the very statement Grafana would.

Written from Grafana's documentation, its forms checked against what the PostgreSQL
datasource's macro engine produces (grafana/grafana, pkg/tsdb/grafana-postgresql-datasource,
macros.go) and what the browser does to variables (public/app/features/templating):

- template variables (Grafana docs, "Variable syntax" and its "Advanced variable format
  options"; the PostgreSQL datasource's "Query editor" page, "Templating"/"Multi-value
  variables"): `$var` and `${var}` in the datasource's own format, where a value of a
  multi-value (or "Include All") variable is quoted ('v', a quote doubled) and the values are
  joined by commas, and a single value of another variable has its quotes doubled but is not
  quoted; `${var:sqlstring}` quotes each value ('v', a quote doubled) and joins them by
  commas; `${var:csv}` joins the values by commas; `${var:singlequote}` quotes each value
  ('v', a quote escaped as \\'). "All" stands for every value of the variable, unless the
  variable has a custom all value, which is put into the query as it is, unformatted
  ("Custom all value": "it is never escaped");
- the global variables `$__interval` and `$__interval_ms` (docs, "Global variables"): the
  time range divided by the panel's maximum data points, rounded to a round interval and no
  finer than the panel's minimum interval (docs, "Query options");
- the PostgreSQL macros (PostgreSQL datasource docs, "Macros"): `$__timeFilter(col)` →
  `col BETWEEN '<from>' AND '<to>'` with the range's ends in UTC, RFC 3339;
  `$__timeFrom()`/`$__timeTo()` → those ends, quoted; `$__timeGroup(col, interval[, fill])`
  → `floor(extract(epoch from col)/<s>)*<s>`, or with the datasource's TimescaleDB option
  `time_bucket('<s>.000s', col)` ("If enabled, Grafana uses time_bucket in the $__timeGroup
  macro"); the fill argument changes the frames Grafana builds from the rows, not the SQL;
  `$__timeGroupAlias` the same with `AS "time"`. Variables are replaced first (in the
  browser), macros then (by the datasource on the server).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

__all__ = ["Variable", "expand", "interval_for", "interval_text", "parse_interval"]


@dataclass(frozen=True)
class Variable:
    """A variable's current value: `values` chosen, or None for "All" (whose values are
    `options`, unless the variable has a custom `all_value`)."""

    values: Sequence[str] | None
    multi: bool = True
    include_all: bool = True
    all_value: str | None = None
    options: Sequence[str] = field(default_factory=tuple)


# Grafana's round intervals: below each bound, the interval used.
_ROUND = (
    (timedelta(milliseconds=15), timedelta(milliseconds=10)),
    (timedelta(milliseconds=35), timedelta(milliseconds=20)),
    (timedelta(milliseconds=75), timedelta(milliseconds=50)),
    (timedelta(milliseconds=150), timedelta(milliseconds=100)),
    (timedelta(milliseconds=350), timedelta(milliseconds=200)),
    (timedelta(milliseconds=750), timedelta(milliseconds=500)),
    (timedelta(milliseconds=1500), timedelta(seconds=1)),
    (timedelta(seconds=3.5), timedelta(seconds=2)),
    (timedelta(seconds=7.5), timedelta(seconds=5)),
    (timedelta(seconds=12.5), timedelta(seconds=10)),
    (timedelta(seconds=17.5), timedelta(seconds=15)),
    (timedelta(seconds=25), timedelta(seconds=20)),
    (timedelta(seconds=45), timedelta(seconds=30)),
    (timedelta(minutes=1.5), timedelta(minutes=1)),
    (timedelta(minutes=3.5), timedelta(minutes=2)),
    (timedelta(minutes=7.5), timedelta(minutes=5)),
    (timedelta(minutes=12.5), timedelta(minutes=10)),
    (timedelta(minutes=17.5), timedelta(minutes=15)),
    (timedelta(minutes=25), timedelta(minutes=20)),
    (timedelta(minutes=45), timedelta(minutes=30)),
    (timedelta(hours=1.5), timedelta(hours=1)),
    (timedelta(hours=2.5), timedelta(hours=2)),
    (timedelta(hours=4.5), timedelta(hours=3)),
    (timedelta(hours=9), timedelta(hours=6)),
    (timedelta(hours=24), timedelta(hours=12)),
    (timedelta(weeks=1), timedelta(days=1)),
    (timedelta(weeks=3), timedelta(weeks=1)),
    (timedelta(days=365), timedelta(days=30)),
)
_UNITS = (
    ("y", timedelta(days=365)),
    ("w", timedelta(weeks=1)),
    ("d", timedelta(days=1)),
    ("h", timedelta(hours=1)),
    ("m", timedelta(minutes=1)),
    ("s", timedelta(seconds=1)),
    ("ms", timedelta(milliseconds=1)),
)


def parse_interval(text: str) -> timedelta:
    """`30s`, `5m`, `1h`, `1d`, `1w`, `1y`, `100ms`."""
    match = re.fullmatch(r"\s*'?(\d+)(ms|s|m|h|d|w|y)'?\s*", text)
    if match is None:
        raise ValueError(f"not an interval Grafana reads: {text!r}")
    number, unit = match.groups()
    return int(number) * dict(_UNITS)[unit]


def interval_text(interval: timedelta) -> str:
    """The largest unit that divides the interval: `1h`, `30m`, `1d`."""
    for unit, size in _UNITS:
        if interval >= size and interval % size == timedelta(0):
            return f"{interval // size}{unit}"
    raise ValueError(f"interval too small: {interval}")


def interval_for(
    time_from: datetime, time_to: datetime, max_data_points: int, min_interval: str | None
) -> timedelta:
    raw = (time_to - time_from) / max_data_points
    rounded = next((step for bound, step in _ROUND if raw < bound), timedelta(days=365))
    if min_interval is not None:
        rounded = max(rounded, parse_interval(min_interval))
    return rounded


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _format(variable: Variable, spec: str | None) -> str:
    if variable.values is None:
        if variable.all_value is not None:
            return variable.all_value
        values: Sequence[str] = variable.options
    else:
        values = variable.values
    if spec is None:
        if variable.multi or variable.include_all:
            return ",".join(_quote(value) for value in values)
        return ",".join(value.replace("'", "''") for value in values)
    if spec == "sqlstring":
        return ",".join(_quote(value) for value in values)
    if spec == "csv":
        return ",".join(values)
    if spec == "singlequote":
        return ",".join("'" + value.replace("'", "\\'") + "'" for value in values)
    raise ValueError(f"variable format not supported here: {spec}")


_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")
_MACRO = re.compile(r"\$(__\w+)\(([^)]*)\)")


def _rfc3339(moment: datetime) -> str:
    """As Grafana writes a range's end: UTC, RFC 3339, fractions of a second if any."""
    if moment.tzinfo is None:
        raise ValueError("time range ends must be aware datetimes")
    utc = moment.astimezone(UTC)
    fraction = utc.strftime("%f").rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def expand(
    sql: str,
    *,
    variables: Mapping[str, Variable],
    time_from: datetime,
    time_to: datetime,
    max_data_points: int = 1000,
    min_interval: str | None = None,
    timescaledb: bool = False,
) -> str:
    """The statement Grafana's PostgreSQL datasource runs for a panel's `sql`."""
    interval = interval_for(time_from, time_to, max_data_points, min_interval)
    scoped = {
        "__interval": interval_text(interval),
        "__interval_ms": str(interval // timedelta(milliseconds=1)),
    }

    def variable(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in scoped:
            return scoped[name]
        if name not in variables:
            return match.group(0)  # not a variable: a macro, or text Grafana leaves alone
        return _format(variables[name], match.group(2))

    interpolated = _VARIABLE.sub(variable, sql)
    start, end = _rfc3339(time_from), _rfc3339(time_to)

    def macro(match: re.Match[str]) -> str:
        name = match.group(1)
        args = [arg.strip() for arg in match.group(2).split(",")] if match.group(2) else []
        if name == "__timeFilter":
            (column,) = args
            return f"{column} BETWEEN '{start}' AND '{end}'"
        if name == "__timeFrom":
            return f"'{start}'"
        if name == "__timeTo":
            return f"'{end}'"
        if name in ("__timeGroup", "__timeGroupAlias"):
            if len(args) not in (2, 3):
                raise ValueError(f"${name} takes a column, an interval and a fill value")
            seconds = parse_interval(args[1]).total_seconds()
            if timescaledb:
                grouped = f"time_bucket('{seconds:.3f}s',{args[0]})"
            else:
                whole = f"{seconds:g}"
                grouped = f"floor(extract(epoch from {args[0]})/{whole})*{whole}"
            return grouped + (' AS "time"' if name == "__timeGroupAlias" else "")
        raise ValueError(f"macro not supported here: ${name}")

    return _MACRO.sub(macro, interpolated)

"""What Grafana does to a panel's SQL before its PostgreSQL datasource runs it, so that tests
and benchmarks run the very statement Grafana would.

Written from Grafana's source (grafana/grafana at 446b3e1f13300e6160905e8e1c7c39fcab9aa084):
the browser first (public/app/features/plugins/sql SqlDatasource, the scenes query runner and
format registry, packages/grafana-data rangeutil), then the datasource on the server
(pkg/tsdb/grafana-postgresql-datasource macros.go and sqleng, the plugin SDK's gtime):

1. In the browser, template variables: `$var` and `${var}` in the datasource's own format (a
   value of a multi-value or "Include All" variable quoted, 'v' with a quote doubled, values
   joined by commas; a single value of another variable has its quotes doubled, not quoted);
   `${var:sqlstring}` quotes each value, a `'` doubled and a `"` escaped as `\\"`;
   `${var:csv}` joins the values; `${var:singlequote}` quotes each, a quote escaped as `\\'`.
   "All" is every option, unless the variable has a custom all value, put in as it is.
   `$__interval`/`$__interval_ms`: the range divided by the panel's maximum data points (its
   width in pixels unless set; 500 when unknown), rounded to a round interval, no finer than
   the panel's minimum interval or else the datasource's (`1m` when unset).
2. On the server: comments stripped, as releases do since grafana/grafana#121772 (12.1.11,
   12.2.9, 12.3.7, 12.4.3 and later; quotes, identifiers and dollar-quoted strings kept, and a
   SQLCommenter tag `/*key='value'*/` holding no macro); `$__interval_ms`, `$__interval`,
   `$__unixEpochFrom()` and `$__unixEpochTo()` replaced as text; then every `$name(args)`
   expanded as a macro (args split at commas, spaces trimmed), an unknown name refused.
   `$__timeGroup(col, interval[, fill])` checks its interval (positive) and its fill (`NULL`,
   `previous` or a number: the fill changes the frames Grafana builds, not the SQL), and is
   `$__timeGroupAlias` when a comma follows it (the pre-5.3 form).
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

__all__ = ["DATASOURCE_MIN_INTERVAL", "Variable", "expand", "interval_for", "strip_comments"]

# The SQL datasources' "Min time interval" when the datasource's jsonData has no timeInterval.
DATASOURCE_MIN_INTERVAL = "1m"
# What the scenes query runner asks for when it knows neither maxDataPoints nor a width.
DEFAULT_MAX_DATA_POINTS = 500


@dataclass(frozen=True)
class Variable:
    """A variable's current value: `values` chosen, or None for "All" (whose values are
    `options`, unless the variable has a custom `all_value`)."""

    values: Sequence[str] | None
    multi: bool = True
    include_all: bool = True
    all_value: str | None = None
    options: Sequence[str] = field(default_factory=tuple)


# --- the interval (browser) -------------------------------------------------------------

# rangeutil's roundInterval, in milliseconds: below each bound, the interval used; a year above.
_ROUND_MS = (
    (10, 1),
    (15, 10),
    (35, 20),
    (75, 50),
    (150, 100),
    (350, 200),
    (750, 500),
    (1_500, 1_000),
    (3_500, 2_000),
    (7_500, 5_000),
    (12_500, 10_000),
    (17_500, 15_000),
    (25_000, 20_000),
    (45_000, 30_000),
    (90_000, 60_000),
    (210_000, 120_000),
    (450_000, 300_000),
    (750_000, 600_000),
    (1_050_000, 900_000),
    (1_500_000, 1_200_000),
    (2_700_000, 1_800_000),
    (5_400_000, 3_600_000),
    (9_000_000, 7_200_000),
    (16_200_000, 10_800_000),
    (32_400_000, 21_600_000),
    (86_400_000, 43_200_000),
    (604_800_000, 86_400_000),
    (1_814_400_000, 604_800_000),
    (3_628_800_000, 2_592_000_000),
)
_YEAR_MS = 31_536_000_000
_LIMIT_UNITS = {"y": 31_536_000, "M": 2_592_000, "w": 604_800, "d": 86_400, "h": 3_600, "m": 60}
_LIMIT = re.compile(r"(-?\d+(?:\.\d+)?)(ms|[Mwdhmsy])")
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?\s*", re.IGNORECASE)


def _limit_ms(text: str) -> float:
    """A minimum interval as rangeutil reads it: a bare non-zero number is seconds; else a
    count (its whole part) and a unit at the start, the rest ignored."""
    if _NUMBER.fullmatch(text) and float(text) != 0:
        whole = re.match(r"\s*([+-]?\d+)", text)  # parseInt: ".5" is NaN, no limit
        return int(whole.group(1)) * 1000 if whole else 0
    match = _LIMIT.match(text)
    if match is None:
        raise ValueError(f"not an interval Grafana reads: {text!r}")
    count = int(match.group(1).split(".")[0])
    unit = match.group(2)
    return count * (1 if unit == "ms" else 1000 * (_LIMIT_UNITS.get(unit) or 1))


def interval_for(
    time_from: datetime,
    time_to: datetime,
    max_data_points: int,
    min_interval: str | None = None,
) -> timedelta:
    """rangeutil.calculateInterval: the range over the data points, rounded, at least the
    panel's minimum interval (else the datasource's)."""
    raw = (time_to - time_from) / timedelta(milliseconds=1) / max_data_points
    rounded = next((step for bound, step in _ROUND_MS if raw < bound), _YEAR_MS)
    return timedelta(milliseconds=max(rounded, _limit_ms(min_interval or DATASOURCE_MIN_INTERVAL)))


def _seconds_to_hms(interval: timedelta) -> str:
    """rangeutil.secondsToHms: the count of the largest unit reached, the rest dropped."""
    rest = interval.total_seconds()
    for unit, size in (("y", 31_536_000), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if count := int(rest // size):
            return f"{count}{unit}"
        rest %= size
    milliseconds = int(interval.total_seconds() * 1000)
    return f"{milliseconds}ms" if milliseconds else "less than a millisecond"


def _format_interval(nanoseconds: int) -> str:
    """gtime.FormatInterval, the server's spelling of `$__interval`."""
    for unit, size in (("y", 365 * 86_400), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if nanoseconds >= size * 10**9:
            return f"{nanoseconds // (size * 10**9)}{unit}"
    return f"{nanoseconds // 10**6}ms" if nanoseconds >= 10**6 else "1ms"


# --- variables (browser) ----------------------------------------------------------------


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
        return ",".join(_quote(value.replace('"', '\\"')) for value in values)
    if spec == "csv":
        return ",".join(values)
    if spec == "singlequote":
        return ",".join("'" + value.replace("'", "\\'") + "'" for value in values)
    raise ValueError(f"variable format not supported here: {spec}")


_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")


# --- comments (server) ------------------------------------------------------------------

_WS = r"[\t\n\f\r ]"
_COMMENTER_TAG = re.compile(
    rf"/\*{_WS}*[a-zA-Z0-9%_.-]+='[^'*]*'({_WS}*,{_WS}*[a-zA-Z0-9%_.-]+='[^'*]*')*{_WS}*\*/"
)
_MACRO_TOKEN = re.compile(rf"\$(__[a-zA-Z0-9_]*|[_a-zA-Z0-9]+{_WS}*\()")


def _tag_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


def strip_comments(sql: str) -> str:
    """Grafana's stripSQLComments: `--` to the end of the line and `/* */` removed, except
    inside quotes, quoted identifiers and dollar-quoted strings; a SQLCommenter tag with no
    macro token kept. An unclosed block comment is dropped but for its last character, as
    Grafana's scan leaves it."""
    out: list[str] = []
    i, n = 0, len(sql)

    def enclosed(i: int, opening: str, closing: str, doubled: bool) -> int:
        out.append(opening)
        i += len(opening)
        while i < n:
            if sql.startswith(closing, i):
                out.append(closing)
                i += len(closing)
                if not (doubled and sql.startswith(closing, i)):
                    return i
                out.append(closing)
                i += len(closing)
                continue
            out.append(sql[i])
            i += 1
        return i

    while i < n:
        char = sql[i]
        if char == "$":
            end = i + 1
            if end < n and sql[end] == "$":
                i = enclosed(i, "$$", "$$", doubled=False)
                continue
            if end < n and _tag_char(sql[end]) and not sql[end].isdigit():
                while end + 1 < n and _tag_char(sql[end + 1]):
                    end += 1
                if end + 1 < n and sql[end + 1] == "$":
                    tag = sql[i : end + 2]
                    i = enclosed(i, tag, tag, doubled=False)
                    continue
            out.append(char)
            i += 1
        elif char in "'\"":
            i = enclosed(i, char, char, doubled=True)
        elif sql.startswith("/*", i):
            start, i, closed = i, i + 2, False
            while i + 1 < n:
                if sql.startswith("*/", i):
                    i, closed = i + 2, True
                    break
                i += 1
            comment = sql[start:i]
            if closed and _COMMENTER_TAG.fullmatch(comment) and not _MACRO_TOKEN.search(comment):
                out.append(comment)
        elif sql.startswith("--", i):
            while i < n and sql[i] != "\n":
                i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


# --- macros (server) --------------------------------------------------------------------

_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9}
_NS |= {"m": 60 * 10**9, "h": 3_600 * 10**9}
_GO_DURATION = re.compile(r"[-+]?(0|((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)")
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_CALENDAR = re.compile(r"(\d+)([dwMy])")
_GO_FLOAT = re.compile(
    r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"
    r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+"
    r"|inf|infinity)|nan",
    re.IGNORECASE,
)


def _add_date(day: date, years: int, months: int) -> date:
    """Go's AddDate: the month and day carried over (31 January + 1 month is 3 March)."""
    month = day.month - 1 + months
    first = date(day.year + years + month // 12, month % 12 + 1, 1)
    return first + timedelta(days=day.day - 1)


def _parse_interval(text: str, now: datetime) -> int:
    """gtime.ParseInterval, in nanoseconds: `<n>d`, `w`, `M`, `y` by the calendar from now
    (UTC); anything else as Go's time.ParseDuration (`90s`, `1h30m`, `1.5h`)."""
    calendar = _CALENDAR.fullmatch(text)
    if calendar is not None:
        count, unit = int(calendar.group(1)), calendar.group(2)
        today = now.astimezone(UTC).date()
        later = {
            "d": today + timedelta(days=count),
            "w": today + timedelta(weeks=count),
            "M": _add_date(today, 0, count),
            "y": _add_date(today, count, 0),
        }[unit]
        return (later - today).days * 86_400 * 10**9
    if _GO_DURATION.fullmatch(text) is None:
        raise ValueError(text)
    total = sum(
        (Fraction(number) * _NS[unit] for number, unit in _GO_PART.findall(text)), Fraction(0)
    )
    nanoseconds = int(total) * (-1 if text.startswith("-") else 1)
    if abs(nanoseconds) >= 2**63:
        raise ValueError(text)
    return nanoseconds


def _check_fill(fill: str) -> None:
    """sqleng.SetupFillmode: `NULL`, `previous`, or what Go's ParseFloat reads."""
    if fill in ("NULL", "previous"):
        return
    if _GO_FLOAT.fullmatch(fill) is None or (
        # Go refuses a number out of float64's range; Python reads it as infinity.
        "inf" not in fill.lower() and "x" not in fill.lower() and abs(float(fill)) == float("inf")
    ):
        raise ValueError(f"error parsing fill value {fill}")


def _go_float(value: float) -> str:
    """Go's %v of a float64: the shortest digits, in exponent form from 1e6 (or below 1e-4)."""
    if value == 0:
        return "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent
    if not -4 <= point - 1 < 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{mantissa}e{point - 1:+03d}"
    elif point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if sign else "") + text


def _rfc3339(moment: datetime) -> str:
    """As Go's RFC3339Nano writes a range's end: UTC, fractions of a second if any."""
    if moment.tzinfo is None:
        raise ValueError("time range ends must be aware datetimes")
    utc = moment.astimezone(UTC)
    fraction = utc.strftime("%f").rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _unix_nano(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^)]*)\)")


def _macros(
    time_from: datetime, time_to: datetime, timescaledb: bool, now: datetime
) -> Callable[[str, list[str]], str]:
    start, end = _rfc3339(time_from), _rfc3339(time_to)

    def group(name: str, args: list[str]) -> float:
        if len(args) < 2:
            raise ValueError(f"macro {name} needs time column and interval and optional fill value")
        try:
            interval = _parse_interval(args[1].strip("'"), now)
        except ValueError:
            raise ValueError(f"error parsing interval {args[1]}") from None
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {args[1]}")
        if len(args) == 3:
            _check_fill(args[2])
        return interval // 10**9 + (interval % 10**9) / 1e9

    def macro(name: str, args: list[str]) -> str:
        if name == "__time":
            return f'{args[0]} AS "time"'
        if name == "__timeEpoch":
            return f'extract(epoch from {args[0]}) as "time"'
        if name == "__timeFilter":
            return f"{args[0]} BETWEEN '{start}' AND '{end}'"
        if name == "__timeFrom":
            return f"'{start}'"
        if name == "__timeTo":
            return f"'{end}'"
        if name == "__timeGroup":
            seconds = group(name, args)
            if timescaledb:
                return f"time_bucket('{seconds:.3f}s',{args[0]})"
            return f"floor(extract(epoch from {args[0]})/{_go_float(seconds)})*{_go_float(seconds)}"
        if name == "__unixEpochGroup":
            seconds = group(name, args)
            return f"floor(({args[0]})/{_go_float(seconds)})*{_go_float(seconds)}"
        if name in ("__timeGroupAlias", "__unixEpochGroupAlias"):
            return macro(name.removesuffix("Alias"), args) + ' AS "time"'
        if name in ("__unixEpochFilter", "__unixEpochNanoFilter"):
            low, high = (
                (_unix_nano(time_from), _unix_nano(time_to))
                if "Nano" in name
                else (_unix_nano(time_from) // 10**9, _unix_nano(time_to) // 10**9)
            )
            return f"{args[0]} >= {low} AND {args[0]} <= {high}"
        if name == "__unixEpochNanoFrom":
            return str(_unix_nano(time_from))
        if name == "__unixEpochNanoTo":
            return str(_unix_nano(time_to))
        raise ValueError(f'unknown macro "{name}"')

    return macro


def expand(
    sql: str,
    *,
    variables: Mapping[str, Variable],
    time_from: datetime,
    time_to: datetime,
    max_data_points: int = DEFAULT_MAX_DATA_POINTS,
    min_interval: str | None = None,
    timescaledb: bool = False,
    now: datetime | None = None,
) -> str:
    """The statement Grafana's PostgreSQL datasource runs for a panel's `sql`; ValueError with
    Grafana's message where Grafana refuses it. `now` (default: the clock) is what calendar
    intervals (`1M`, `1y`) of `$__timeGroup` count from."""
    interval = interval_for(time_from, time_to, max_data_points, min_interval)
    milliseconds = str(interval // timedelta(milliseconds=1))
    scoped = {"__interval": _seconds_to_hms(interval), "__interval_ms": milliseconds}

    def variable(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in scoped:
            return scoped[name]
        if name not in variables:
            return match.group(0)  # not a variable: a macro, or text Grafana leaves alone
        return _format(variables[name], match.group(2))

    sent = _VARIABLE.sub(variable, sql)

    server = strip_comments(sent)
    nanoseconds = interval // timedelta(microseconds=1) * 1000
    for text, value in (
        ("$__interval_ms", milliseconds),
        ("$__interval", _format_interval(nanoseconds)),
        ("$__unixEpochFrom()", str(_unix_nano(time_from) // 10**9)),
        ("$__unixEpochTo()", str(_unix_nano(time_to) // 10**9)),
    ):
        server = server.replace(text, value)

    macro = _macros(time_from, time_to, timescaledb, now or datetime.now(UTC))

    def call(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "__timeGroup":
            # The pre-5.3 form: a comma right after the call (first written) asks for the alias.
            after = server.find(match.group(0)) + len(match.group(0))
            if server[after : after + 1] == ",":
                name = "__timeGroupAlias"
        return macro(name, [arg.strip(" ") for arg in match.group(2).split(",")])

    return _MACRO.sub(call, server)

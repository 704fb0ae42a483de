"""Go's time formatting: `Time.Format` layouts ("2006-01-02T15:04:05Z07:00") and `Time.String`.

Used by sprig's `date` and wherever a time is printed. A naive datetime is taken as UTC. The
zone name is the datetime's own abbreviation ("UTC", "CET"); zones without one (fixed
offsets) print as "+0200", as Go's unnamed zones do.
"""

from datetime import UTC, datetime, timedelta

__all__ = ["format_layout", "go_time_string"]

_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# Layout elements, longest first where one is a prefix of another (Go's nextStdChunk order).
_ZONES = ["Z07:00:00", "-07:00:00", "Z070000", "-070000", "Z07:00", "-07:00", "Z0700", "-0700"]
_ZONES_SHORT = ["Z07", "-07"]


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _offset(moment: datetime) -> timedelta:
    return moment.utcoffset() or timedelta(0)


def _zone_name(moment: datetime) -> str:
    name = moment.tzname() or ""
    if _offset(moment) == timedelta(0) and name in ("", "UTC", "UTC+00:00"):
        return "UTC"
    if not name or name.startswith("UTC") or not name.replace("+", "").replace("-", "").isalnum():
        return _numeric_zone(moment, "-0700")
    return name


def _numeric_zone(moment: datetime, element: str) -> str:
    seconds = int(_offset(moment).total_seconds())
    if element.startswith("Z") and seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    hours, minutes, secs = seconds // 3600, seconds // 60 % 60, seconds % 60
    body = element[1:]
    if body == "07":
        return f"{sign}{hours:02d}"
    if body == "0700":
        return f"{sign}{hours:02d}{minutes:02d}"
    if body == "07:00":
        return f"{sign}{hours:02d}:{minutes:02d}"
    if body == "070000":
        return f"{sign}{hours:02d}{minutes:02d}{secs:02d}"
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"


def _fraction(moment: datetime, digit: str, width: int, separator: str) -> str:
    nanos = f"{moment.microsecond * 1000:09d}"[:width]
    if digit == "9":
        nanos = nanos.rstrip("0")
        if not nanos:
            return ""
    return separator + nanos


def _element(layout: str, index: int) -> tuple[str, int] | None:
    """The layout element starting at `index`, as (kind, length), if one does."""
    rest = layout[index : index + 9]  # the longest element but fractions; no copy of it all
    first = rest[0]
    if first == "J" and rest.startswith("Jan"):
        if rest.startswith("January"):
            return "January", 7
        if not rest[3:4].islower():
            return "Jan", 3
    if first == "M":
        if rest.startswith("Mon"):
            if rest.startswith("Monday"):
                return "Monday", 6
            if not rest[3:4].islower():
                return "Mon", 3
        if rest.startswith("MST"):
            return "MST", 3
    if first == "0":
        if rest[1:2] in ("1", "2", "3", "4", "5", "6"):
            return rest[:2], 2
        if rest.startswith("002"):
            return "002", 3
    if first == "1":
        return ("15", 2) if rest.startswith("15") else ("1", 1)
    if first == "2":
        return ("2006", 4) if rest.startswith("2006") else ("2", 1)
    if first == "_":
        if rest.startswith("_2"):
            return ("_", 1) if rest.startswith("_2006") else ("_2", 2)
        if rest.startswith("__2"):
            return "__2", 3
    if first in "345":
        return first, 1
    if rest.startswith(("PM", "pm")):
        return rest[:2], 2
    if first in "-Z":
        for zone in (*_ZONES, *_ZONES_SHORT):
            if rest.startswith(zone):
                return zone, len(zone)
    if first in ".," and rest[1:2] in ("0", "9"):
        digit = rest[1]
        end = index + 1
        while end < len(layout) and layout[end] == digit:
            end += 1
        if not layout[end : end + 1].isdigit():
            return f"frac{first}{digit}{end - index - 1}", end - index
    return None


def _render(moment: datetime, kind: str) -> str:
    hour12 = moment.hour % 12 or 12
    simple = {
        "January": _MONTHS[moment.month - 1],
        "Jan": _MONTHS[moment.month - 1][:3],
        "Monday": _DAYS[moment.weekday()],
        "Mon": _DAYS[moment.weekday()][:3],
        "MST": _zone_name(moment),
        "01": f"{moment.month:02d}",
        "02": f"{moment.day:02d}",
        "03": f"{hour12:02d}",
        "04": f"{moment.minute:02d}",
        "05": f"{moment.second:02d}",
        "06": f"{moment.year % 100:02d}",
        "002": f"{moment.timetuple().tm_yday:03d}",
        "1": str(moment.month),
        "15": f"{moment.hour:02d}",
        "2006": f"{moment.year:04d}",
        "2": str(moment.day),
        "_": "_",
        "_2": f"{moment.day:2d}",
        "__2": f"{moment.timetuple().tm_yday:3d}",
        "3": str(hour12),
        "4": str(moment.minute),
        "5": str(moment.second),
        "PM": "PM" if moment.hour >= 12 else "AM",
        "pm": "pm" if moment.hour >= 12 else "am",
    }
    if kind in simple:
        return simple[kind]
    if kind.startswith("frac"):
        return _fraction(moment, kind[5], int(kind[6:]), kind[4])
    return _numeric_zone(moment, kind)


def format_layout(moment: datetime, layout: str) -> str:
    """Go's `Time.Format(layout)`."""
    moment = _aware(moment)
    out: list[str] = []
    rendered: dict[str, str] = {}  # each kind of element rendered once
    index = 0
    while index < len(layout):
        found = _element(layout, index)
        if found is None:
            out.append(layout[index])
            index += 1
            continue
        kind, length = found
        text = rendered.get(kind)
        if text is None:
            text = rendered[kind] = _render(moment, kind)
        out.append(text)
        index += length
    return "".join(out)


def go_time_string(moment: datetime) -> str:
    """Go's `Time.String()`: "2006-01-02 15:04:05.999999999 -0700 MST"."""
    return format_layout(moment, "2006-01-02 15:04:05.999999999 -0700 MST")

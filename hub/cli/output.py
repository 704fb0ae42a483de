"""What every subcommand prints with: the consoles, output formats, tables and clean failures.

Outside a terminal nothing is cut to a width (docs/cli.md); every table is also CSV (a header
row, quoted by the csv module) or the hub's document as JSON. It needs only the plain install,
so the commands that ask a hub over HTTP run without the hub's extra.
"""

import csv
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import IO, Annotated, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich import box
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hub.cli.exits import ExitCode

# What a command answers: the hub's document, or a list of them.
D = TypeVar("D", bound=BaseModel | Sequence[BaseModel])

# The width of a console that is not a terminal: wider than any row, so none is cut.
UNBOUNDED = 1_000_000


def on_terminal(file: IO[str]) -> bool:
    """Whether `file` is a terminal, whatever FORCE_COLOR says (colours in a CI log are fine;
    cutting its lines to 80 columns is not)."""
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


class _Console(Console):
    """A console that is as wide as the terminal on a terminal, and unbounded elsewhere."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if on_terminal(self.file):
            return size
        return ConsoleDimensions(UNBOUNDED, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console: Console = _Console()
errors: Console = _Console(stderr=True)


class Output(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


OutputOption = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="table for people; json (the hub's document) or csv for scripts."
    ),
]


class Failed(typer.Exit):
    """The command could not do what was asked; its message is printed already."""


def fail(message: str) -> Failed:
    errors.print(f"[bold red]error:[/] {message}", highlight=False)
    return Failed(code=ExitCode.NO_ANSWER)


def missing_extra(command: str, extra: str, exc: ModuleNotFoundError) -> typer.Exit:
    """`fleetmark COMMAND` cannot run: the packages of fleetmark[EXTRA] are not installed."""
    return fail(
        escape(
            f"fleetmark {command} needs what fleetmark[{extra}] installs ({exc}): "
            f"pip install 'fleetmark[{extra}]'"
        )
    )


def show_token(name: str, token: str, what: str) -> None:
    console.print(
        f"{what} [bold]{name}[/]. Its token, shown only this once:",
        highlight=False,
        soft_wrap=True,
    )
    console.print(token, style="bold green", highlight=False, soft_wrap=True)


def print_json(value: BaseModel | Sequence[BaseModel]) -> None:
    data: object = (
        value.model_dump(mode="json")
        if isinstance(value, BaseModel)
        else [item.model_dump(mode="json") for item in value]
    )
    console.print_json(json.dumps(data))


# --- validation errors in plain words ---------------------------------------------------------

# pydantic's messages, reworded to follow the option's name: "--limit: must be at most 1000".
_REWORDINGS = (
    (re.compile(r"^(?:Value error|Assertion failed), "), ""),
    (re.compile(r"^Field required$"), "is required"),
    (re.compile(r"^(?:String|Input|Value|List|Tuple|Dictionary|Set|Decimal) should "), "must "),
    (re.compile(r"^must have (at (?:most|least) \d+ characters?)"), r"must be \1"),
    (re.compile(r"^must be less than or equal to "), "must be at most "),
    (re.compile(r"^must be greater than or equal to "), "must be at least "),
)


def plain_rule(message: str) -> str:
    """A rule as pydantic words it, reworded to follow a name: "must be at most 63 characters"."""
    for pattern, replacement in _REWORDINGS:
        message = pattern.sub(replacement, message)
    return message


def invalid(problems: Iterable[tuple[str, str]]) -> str:
    """`--environment: must be at most 63 characters; --limit: must be at most 1000`, from
    (name, pydantic message) pairs."""
    return "; ".join(f"{name}: {plain_rule(message)}" for name, message in problems)


def option_name(field: str, options: Mapping[str, str] | None = None) -> str:
    """The option a field came from: `--cluster-type` for cluster_type, unless `options`
    names it otherwise (a field the command takes as an argument, or by another name)."""
    top = field.split(".", 1)[0]
    if options is not None and top in options:
        return options[top]
    return "--" + top.replace("_", "-") if top else "the input"


def validation_failure(exc: ValidationError, options: Mapping[str, str] | None = None) -> str:
    """A ValidationError of what the user gave, naming each option and the rule it broke."""
    return invalid(
        (option_name(".".join(str(part) for part in error["loc"]), options), error["msg"])
        for error in exc.errors()
    )


# --- tables, for people and as CSV ------------------------------------------------------------


def when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class Cell:
    """Words for people (`5m ago`), the full value in CSV (the time itself)."""

    people: Text | str
    value: object


def short_sha(sha: str) -> str:
    """A commit for people: 12 digits on a terminal, whole elsewhere (a pipe, a log)."""
    return sha[:12] if on_terminal(console.file) else sha


def abbreviated(sha: str) -> Cell:
    return Cell(short_sha(sha), sha)


def _shown(value: object) -> Text:
    """Cells are plain text: a name the hub sends is never read as rich markup."""
    if isinstance(value, Cell):
        return value.people if isinstance(value.people, Text) else Text(value.people)
    if isinstance(value, Text):
        return value
    if value is None:
        return Text("-", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, int):
        return Text(f"{value:,}")
    if isinstance(value, datetime):
        return Text(when(value))
    return Text(str(value))


def _written(value: object) -> str:
    if isinstance(value, Cell):
        return _written(value.value)
    if isinstance(value, Text):
        return value.plain
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class Rows:
    """A table: its headers and rows of values (None, counts, times, text or a Cell)."""

    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    title: str | None = None


def rows_table(rows: Rows) -> Table:
    """A table for people: None as `-`, times to the second, counts right-aligned.

    On a narrow terminal the headers of counts give way first (wrapped, then cut); the
    counts themselves, names, times and revisions are kept whole as long as they fit.
    """
    table = Table(title=rows.title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for index, header in enumerate(rows.headers):
        values = [row[index] for row in rows.rows if row[index] is not None]
        counts = all(_is_count(value) for value in values)
        table.add_column(
            header,
            justify="right" if counts and values else "left",
            no_wrap=not counts,
            min_width=max((len(_shown(value)) for value in values), default=1) if counts else None,
        )
    for row in rows.rows:
        table.add_row(*(_shown(value) for value in row))
    return table


def print_csv(rows: Rows) -> None:
    """The table as CSV on stdout: a header row, then each row with full values."""
    written = io.StringIO()
    writer = csv.writer(written, lineterminator="\n")
    writer.writerow(rows.headers)
    writer.writerows([_written(value) for value in row] for row in rows.rows)
    console.file.write(written.getvalue())


def show(
    document: D,
    output: Output,
    rows: Callable[[D], Rows],
    render: Callable[[D], None] | None = None,
) -> None:
    """A command's answer: `document` as JSON, its `rows` as CSV, or for people `render`ed
    (by default the rows as a table)."""
    if output is Output.json:
        print_json(document)
    elif output is Output.csv:
        print_csv(rows(document))
    elif render is not None:
        render(document)
    else:
        console.print(rows_table(rows(document)))

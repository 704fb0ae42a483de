"""What every subcommand prints with: the consoles, output formats and clean failures.

It needs only the plain install (typer, rich, pydantic), so the commands that ask a hub over
HTTP run where the hub's extra is not installed.
"""

import json
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

console = Console()
errors = Console(stderr=True)


class Output(StrEnum):
    table = "table"
    json = "json"


OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="table for people, json for scripts.")
]


def fail(message: str) -> typer.Exit:
    errors.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code=1)


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


def print_json(value: BaseModel | list[BaseModel]) -> None:
    data: object = (
        [item.model_dump(mode="json") for item in value]
        if isinstance(value, list)
        else value.model_dump(mode="json")
    )
    console.print_json(json.dumps(data))

"""`python -m dashboards build` writes the generated files; `check` fails naming each
committed file that differs from a fresh build."""

import sys

import typer

from dashboards import build

app = typer.Typer(no_args_is_help=True, pretty_exceptions_show_locals=False)


@app.command("build")
def build_command() -> None:
    """Write the dashboards' JSON (and every other generated file) under dashboards/."""
    for path in build.write():
        typer.echo(f"wrote {path.relative_to(build.ROOT.parent)}")


@app.command("check")
def check_command() -> None:
    """Fail if a committed file differs from a fresh build."""
    stale = build.check()
    for path in stale:
        typer.echo(
            f"{path.relative_to(build.ROOT.parent)} differs from a fresh build: "
            "run `python -m dashboards build` and commit it",
            err=True,
        )
    if stale:
        raise typer.Exit(1)
    typer.echo(f"{len(build.render())} generated files are up to date")


if __name__ == "__main__":
    sys.exit(app())

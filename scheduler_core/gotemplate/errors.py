"""The one error type of the template engine, for parse and execution errors alike.

Messages read like Go's so that a Kalypso user recognises them, e.g.
`template: reconciler.yaml:3:14: function "nope" not defined`. Lines count from 1; columns
count characters from 0 within the line, as Go's do.
"""

__all__ = ["TemplateError"]


class TemplateError(Exception):
    """A template could not be parsed or rendered.

    `name` is the text the error is in (the name given to `Template.parse`/`add`),
    `line`/`column` the position in that text when there is one, `executing` the template
    that was running (for execution errors) and `detail` the bare reason.
    """

    def __init__(
        self,
        detail: str,
        *,
        name: str | None = None,
        line: int | None = None,
        column: int | None = None,
        executing: str | None = None,
        context: str | None = None,
    ) -> None:
        self.detail = detail
        self.name = name
        self.line = line
        self.column = column
        self.executing = executing
        self.context = context
        super().__init__(self._message())

    def _message(self) -> str:
        where = ""
        if self.name is not None:
            where = self.name
            if self.line is not None:
                where += f":{self.line}:{self.column if self.column is not None else 0}"
            where += ": "
        if self.executing is not None:
            at = f" at <{self.context}>" if self.context is not None else ""
            return f'template: {where}executing "{self.executing}"{at}: {self.detail}'
        return f"template: {where}{self.detail}"

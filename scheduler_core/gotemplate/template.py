"""`Template`: a set of named Go templates, parsed once and rendered many times."""

from collections.abc import Callable, Mapping
from datetime import datetime

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.executor import execute
from scheduler_core.gotemplate.functions import Function, caller_functions, default_functions
from scheduler_core.gotemplate.limits import Limits
from scheduler_core.gotemplate.meter import Meter
from scheduler_core.gotemplate.nodes import Tree
from scheduler_core.gotemplate.parser import is_empty, parse
from scheduler_core.gotemplate.syntax import go_quote

__all__ = ["Template"]

_DEFAULT_FUNCTIONS = default_functions()


class Template:
    """Go templates parsed from one or more texts, rendered by name.

    Like Go's `*template.Template`: the first text gives the template its name; its
    `{{define}}`s and `{{block}}`s, and the texts added later with `add`, join the same set,
    so they can call each other with `{{template}}` and `include`. A later non-empty
    definition of a name replaces an earlier one; an empty one never does. Build one with
    `Template.parse`; a Template is not changed by rendering and may be shared.
    """

    def __init__(
        self,
        name: str,
        functions: Mapping[str, Function],
        callables: Mapping[int, Function],
        limits: Limits,
    ) -> None:
        self._name = name
        self._functions = functions
        self._callables = callables
        self._limits = limits
        self._trees: dict[str, Tree] = {}

    @classmethod
    def parse(
        cls,
        name: str,
        text: str,
        *,
        functions: Mapping[str, Callable[..., object] | Function] | None = None,
        limits: Limits | None = None,
    ) -> "Template":
        """Parses `text` as the template `name`.

        `functions` adds (or overrides) functions by name; each takes its arguments as
        template values (every parameter is Go's `interface {}`) and returns one value, and
        an exception it raises fails the render with "error calling NAME: ...". A `Function`
        declares its parameters and whether it takes the CallContext (whose meter it charges
        for its work) itself. These are also the only values `call` may call. Raises
        TemplateError for a syntax error.
        """
        try:
            extra = caller_functions(functions or {})
        except ValueError as error:
            raise TemplateError(str(error), name=name) from None
        template = cls(
            name,
            {**_DEFAULT_FUNCTIONS, **extra},
            {id(function.impl): function for function in extra.values()},
            limits or Limits(),
        )
        template.add(name, text)
        return template

    @property
    def name(self) -> str:
        return self._name

    @property
    def names(self) -> tuple[str, ...]:
        """The names of all templates in the set, sorted."""
        return tuple(sorted(self._trees))

    def add(self, name: str, text: str) -> None:
        """Parses another text into the set as the template `name` (and its definitions)."""
        try:
            trees = parse(name, text, functions=self._functions, max_depth=self._limits.max_depth)
        except RecursionError:
            raise TemplateError("text nests too deeply to parse", name=name) from None
        for tree_name, tree in trees.items():
            existing = self._trees.get(tree_name)
            if existing is None or not is_empty(tree.root):
                self._trees[tree_name] = tree

    def render(
        self,
        data: object = None,
        *,
        now: datetime | None = None,
        name: str | None = None,
        meter: Meter | None = None,
    ) -> str:
        """Executes the template `name` (by default the set's own) over `data`.

        `now` is the clock reading `now` and `date` use; without it they fail, so that a
        render never depends on the machine's clock. It must carry a time zone. `meter` is
        what the render's work is charged to, with its budget and deadline; several renders
        may share one, to be bounded together. Without it, a meter of `Limits.max_cost` and
        no deadline. Raises TemplateError for anything that goes wrong, including exceeding
        the Limits or the meter's budget or deadline (a `LimitExceeded`).
        """
        target = self._name if name is None else name
        if target not in self._trees:
            raise TemplateError(
                f"no template {go_quote(target)} associated with template {go_quote(self._name)}"
            )
        if now is not None and now.utcoffset() is None:
            raise TemplateError("now must be a timezone-aware datetime", name=target)
        return execute(
            self._trees,
            target,
            data,
            functions=self._functions,
            callables=self._callables,
            limits=self._limits,
            now=now,
            meter=meter if meter is not None else Meter(self._limits.max_cost),
        )

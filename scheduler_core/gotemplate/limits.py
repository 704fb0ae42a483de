"""The guard rails of a render: how much a template may print, nest, compute and build.

A template comes from a Git repository, not from the operator of the hub, so no template
may hang the scheduler or exhaust its memory. Exceeding a limit is a `TemplateError`
(a `LimitExceeded`).
"""

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds for one render.

    - `max_output_chars`: characters one render (or one string a function builds) may hold.
    - `max_depth`: how deeply templates may nest, counting template calls (`template`,
      `include`, `tpl`), `if`/`with`/`range` blocks and parentheses.
    - `max_cost`: the cost units one render may spend (`scheduler_core.gotemplate.meter`):
      four per evaluation step or function call, one per element a function touches, one per
      4 characters read or written. A million units is a second or two of work; a Kalypso
      assignment's templates spend a few hundred to a few thousand together.
    - `max_items`: elements a function may build into one list or map (`until`, `seq`,
      `split`, ...).

    A render may instead be handed a `Meter` of its own (`Template.render(meter=...)`),
    whose budget and deadline then count in place of `max_cost`.
    """

    max_output_chars: int = 1 << 20
    max_depth: int = 64
    max_cost: int = 1_000_000
    max_items: int = 100_000

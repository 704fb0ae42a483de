"""The guard rails of a render: how much a template may print, nest, compute and build.

A template comes from a Git repository, not from the operator of the hub, so no template
may hang the scheduler or exhaust its memory. Exceeding a limit is a `TemplateError`.
"""

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds for one render.

    - `max_output_chars`: characters one render (or one string a function builds) may hold.
    - `max_depth`: how deeply templates may nest, counting template calls (`template`,
      `include`, `tpl`), `if`/`with`/`range` blocks and parentheses.
    - `max_steps`: evaluation steps (actions, commands, loop iterations) of one render.
    - `max_items`: elements a function may build into one list or map (`until`, `seq`,
      `split`, ...).
    """

    max_output_chars: int = 1 << 20
    max_depth: int = 64
    max_steps: int = 1_000_000
    max_items: int = 100_000

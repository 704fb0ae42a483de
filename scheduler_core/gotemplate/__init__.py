"""Go `text/template` for the scheduler core: renders Kalypso's templates unchanged.

In the scheduler's data flow this is the last step of an assignment: the Template resources
of the control plane are parsed once, then rendered for every assignment with its context
(`.DeploymentTargetName .Namespace .Environment .Workspace .Workload .Labels .Manifests
.ClusterType .ConfigData`) into the manifests written to the platform GitOps repository.

Usage:

    from scheduler_core.gotemplate import Limits, Template, TemplateError

    template = Template.parse("namespace.yaml", text)      # TemplateError if malformed
    output = template.render(context, now=clock.now())     # TemplateError if it fails
    meter = Meter(Limits().max_cost, clock=time.monotonic, timeout=2.0)
    output = template.render(context, now=..., meter=meter)  # bounded in time as well

- `Template.parse(name, text, *, functions=None, limits=None)` parses a text. `functions`
  adds the caller's own functions by name; `limits` (a `Limits`) bounds every render.
- `Template.add(name, text)` parses another text into the same set; templates of one set
  call each other with `{{template "name" .}}` or `include`.
- `Template.render(data=None, *, now=None, name=None, meter=None)` renders the set's
  template (or the one called `name`) over `data`. `now` is the only clock `now`/`date`
  ever read. `meter` (a `Meter`) is what the render's work is charged to: evaluation steps,
  function calls, the elements functions touch and the characters they read and write, in
  cost units against the meter's budget; with a caller's clock and timeout it ends the
  render at its deadline too. Renders may share one. Without it each render gets a meter of
  `Limits.max_cost` units and no deadline.
- `Template.names` lists the templates of the set; `Template.name` is the first one's.

The language is Go's:

- text and `{{actions}}` with `{{-`/`-}}` trimming and `{{/* */}}` comments;
- pipelines `a | b c`; fields `.A.B` on maps and dataclasses, also after calls `(f x).A`;
- variables `$x := ...`, `$x = ...`, `$`;
- `if`/`else if`/`else`; `range` over lists, maps (sorted keys) and integers with
  `$i, $v :=`, `else`, `break`, `continue`; `with`/`else with`;
- `define`, `template`, `block`; Go literals.

Values print as Go prints
them (`map[a:1]`, `[a b]`, `<nil>`, `<no value>` for a missing key). Functions: Go's
builtins (and or not eq ne lt le gt ge index slice len print printf println html js
urlquery call), the common sprig functions, Helm's `required`/`include`/`tpl`, and
Kalypso's `toYaml`, `stringify`, `hash`, `unquote`.

Data is plain Python: strings, numbers, booleans, None, mappings, lists and tuples,
dataclass instances, datetimes; `StringMap` marks a Go `map[string]string` (Kalypso's
`.Labels` and `.Manifests`), whose absent keys `index` reads as "". A template reads only
what it is given: mapping keys and public dataclass fields; never attributes, methods,
files, the environment or the network. Data passed in is never changed. Every failure, at
parse or render time, is a `TemplateError` naming the template, line and column, the way Go
words it; a limit, budget or deadline reached is a `LimitExceeded`, one of them.
"""

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.executor import LimitExceeded
from scheduler_core.gotemplate.limits import Limits
from scheduler_core.gotemplate.meter import Meter
from scheduler_core.gotemplate.template import Template
from scheduler_core.gotemplate.values import StringMap

__all__ = ["LimitExceeded", "Limits", "Meter", "StringMap", "Template", "TemplateError"]

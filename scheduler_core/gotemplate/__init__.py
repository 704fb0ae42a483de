"""Go `text/template` for the scheduler core: renders Kalypso's templates unchanged.

The last step of an assignment: the control plane's Template resources are parsed once, then
rendered with each assignment's context into the manifests written to the platform GitOps
repository. The language and the API are in docs/scheduling.md and docs/contributing.md.
"""

from scheduler_core.gotemplate.errors import TemplateError
from scheduler_core.gotemplate.executor import LimitExceeded
from scheduler_core.gotemplate.limits import Limits
from scheduler_core.gotemplate.meter import Meter
from scheduler_core.gotemplate.template import Template
from scheduler_core.gotemplate.values import StringMap

__all__ = ["LimitExceeded", "Limits", "Meter", "StringMap", "Template", "TemplateError"]

"""The hub's API for Python: what the command line asks a hub with, and what a script or a
notebook imports (docs/python.md).

It needs the plain install alone (httpx and pydantic); `to_dataframe()` needs pandas
(fleetmark[pandas]). Nothing of the server is imported.
"""

from hub.client.client import DEFAULT_HUB, HubClient
from hub.client.errors import HubError, HubRefused, HubUnreachable, Problem, UnexpectedAnswer

__all__ = [
    "DEFAULT_HUB",
    "HubClient",
    "HubError",
    "HubRefused",
    "HubUnreachable",
    "Problem",
    "UnexpectedAnswer",
]

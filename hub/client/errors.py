"""What goes wrong asking a hub: it cannot be reached, it refuses the question (with its status,
error code and words), or it answers what this client cannot read."""

from dataclasses import dataclass

import httpx
from pydantic import ValidationError

__all__ = ["HubError", "HubRefused", "HubUnreachable", "Problem", "UnexpectedAnswer"]


class HubError(Exception):
    """The hub gave no answer to the question."""


class HubUnreachable(HubError):
    """No answer came: the hub is down, the address is wrong, the connection failed."""

    def __init__(self, url: str, cause: httpx.HTTPError) -> None:
        super().__init__(f"the hub at {url} is unreachable: {cause or type(cause).__name__}")
        self.url = url


@dataclass(frozen=True, slots=True)
class Problem:
    """One rule a request broke, as a 422 answer names it: where (query, path, body), the field
    (a parameter, or a body field by its dotted path) and the rule in words."""

    location: str
    field: str
    message: str


class HubRefused(HubError):
    """The hub answered with an error: `status`, its error code (`unknown_environment`) and
    its words (`detail`); for invalid input (422), each rule broken in `problems`."""

    def __init__(
        self, status: int, error: str | None, detail: str, problems: tuple[Problem, ...] = ()
    ) -> None:
        super().__init__(f"{detail} (HTTP {status})")
        self.status = status
        self.error = error
        self.detail = detail
        self.problems = problems

    @classmethod
    def of(cls, response: httpx.Response) -> "HubRefused":
        """The refusal a response carries: the hub's error document, or what little another
        server's answer says."""
        try:
            body = response.json()
            error, detail = body["error"], body["detail"]
        except (ValueError, KeyError, TypeError):
            return cls(response.status_code, None, response.text[:200] or response.reason_phrase)
        return cls(response.status_code, str(error), str(detail), _problems(body))


def _problems(body: object) -> tuple[Problem, ...]:
    try:
        return tuple(
            Problem(str(item["location"]), str(item["field"]), str(item["message"]))
            for item in body["problems"]  # type: ignore[index]
        )
    except (KeyError, TypeError):
        return ()


class UnexpectedAnswer(HubError):
    """The hub answered, but not as this client reads the answer: a hub of another version."""

    def __init__(self, url: httpx.URL, exc: ValidationError) -> None:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "the document"
        hub = f"{url.scheme}://{url.netloc.decode()}"
        super().__init__(
            f"the hub at {hub} answered {url.path} unexpectedly: {field}: {error['msg']} "
            "(is the hub another version of fleetmark?)"
        )
        self.url = url

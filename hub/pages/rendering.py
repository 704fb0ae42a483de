"""How the built-in pages turn the services' answers into HTML: one Jinja2 environment with
autoescaping on (every name on a page is outside input: clusters, workloads, repositories,
what agents report), and the few filters the templates share."""

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from hub.client.text import format_duration
from hub.pages.access import sign_in_id
from hub.pages.forms import sign_out_form_token
from hub.palette import colour
from hub.settings import HubSettings
from hub.text import format_time, short_sha

STATIC = Path(__file__).parent / "static"
# Rows per page unless `limit` says otherwise: a page stays small at any fleet size.
PAGE_SIZE = 50
# While a gate soaks, its pages reload this often at most (sooner when the soak ends sooner).
SOAK_REFRESH_SECONDS = 15


def when(moment: datetime | None) -> str:
    return "-" if moment is None else format_time(moment)


def short(sha: str | None) -> str:
    return "-" if not sha else short_sha(sha)


def seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(timedelta(seconds=value))


def words(name: str | None) -> str:
    """An enum value as words: never_reported -> never reported."""
    return "-" if name is None else str(name).replace("_", " ")


def badge(state: str, word: str | None = None) -> Markup:
    """A state as a badge: its word (or `word`) in the palette's colour for it."""
    return Markup('<span class="badge {}">{}</span>').format(colour(state), words(word or state))


def refresh_after(soak_ends_at: datetime | None, now: datetime) -> int | None:
    """Seconds until a page showing a soak reloads itself: at the soak's end, or sooner."""
    if soak_ends_at is None:
        return None
    left = math.ceil((soak_ends_at - now).total_seconds())
    return min(max(left, 1), SOAK_REFRESH_SECONDS)


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("hub.pages"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        when=when,
        short=short,
        seconds=seconds,
        words=words,
        badge=badge,
        badge_colour=colour,
    )
    return environment


_TEMPLATES = _environment()


def query(params: Mapping[str, object]) -> str:
    """A query string from values (None left out, a list repeated), for links between pages."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        pairs.extend((key, str(item)) for item in values)
    return urlencode(pairs)


def link(request: Request, **changes: object) -> str:
    """This page's URL with some query parameters replaced (None: removed), so that paging
    keeps the filters of a shared URL."""
    params = request.query_params
    kept: dict[str, object] = {key: params.getlist(key) for key in params if key not in changes}
    encoded = query(kept | changes)
    return f"{request.url.path}?{encoded}" if encoded else request.url.path


def render(
    request: Request, template: str, *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    page = _TEMPLATES.get_template(template)
    settings: HubSettings = request.app.state.settings
    signed_in = sign_in_id(request)
    html = page.render(
        request=request,
        # The sign-out form's token, on every page of a signed-in browser.
        sign_out_token=None
        if signed_in is None
        else sign_out_form_token(settings.token_secret.get_secret_value(), signed_in),
        link=lambda **changes: link(request, **changes),
        query=query,
        **context,
    )
    # A page shows the fleet as it is now, and in production only to a signed-in reader:
    # neither the browser nor a proxy keeps a copy.
    return HTMLResponse(html, status_code=status_code, headers={"Cache-Control": "no-store"})

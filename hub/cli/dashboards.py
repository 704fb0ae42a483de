"""`fleetmark dashboards push`: the dashboards into a running Grafana, over its HTTP API.

For a Grafana that fleetmark's provisioning files are not mounted into (docs/grafana.md).
Nothing is written before Grafana's version is checked and the data source's connection is
known; every refusal says what is wrong and what to do. Secrets are never printed.
"""

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urljoin, urlsplit, urlunsplit

import typer
from grafana_client.api import GrafanaApi
from grafana_client.client import (
    GrafanaClientError,
    GrafanaException,
    GrafanaServerError,
    GrafanaUnauthorizedError,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from requests.exceptions import Timeout

from hub.cli.output import console, fail
from hub.cli.secret_files import read_secret_file

# The names every dashboard and alert rule refers to (see dashboards/provisioning/).
DATASOURCE_UID = "fleetmark"
DATASOURCE_NAME = "fleetmark"
DATASOURCE_TYPE = "grafana-postgresql-datasource"
# Grafana 10.2.3 gave its PostgreSQL plugin the id the data source and every query name;
# before it the plugin was `postgres`, and a data source of the new type would not load.
MINIMUM_GRAFANA = (10, 2, 3)
DEFAULT_FOLDER = "fleetmark"
TIMEOUT_SECONDS = 30.0
# The version history message of every dashboard version a push stores.
PUSH_MESSAGE = "fleetmark dashboards push"

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


class PushRefused(Exception):
    """Grafana, or what stands at its URL, refused the push; the message says what to do."""


class SSLMode(StrEnum):
    """How Grafana's PostgreSQL plugin secures its connection (its `sslmode`)."""

    disable = "disable"
    require = "require"
    verify_ca = "verify-ca"
    verify_full = "verify-full"


@dataclass(frozen=True, slots=True)
class Connection:
    """How Grafana reaches the hub's database: the data source push creates when missing."""

    host: str
    database: str
    user: str
    password: str
    sslmode: SSLMode
    timescaledb: bool

    def describe(self) -> str:
        """Where it points, for people: never the password."""
        return f"PostgreSQL {self.host}, database {self.database}, user {self.user}"

    def datasource(self) -> dict[str, Any]:
        """The body of POST /api/datasources: the fields of the provisioning file's entry."""
        return {
            "name": DATASOURCE_NAME,
            "uid": DATASOURCE_UID,
            "type": DATASOURCE_TYPE,
            "access": "proxy",
            "url": self.host,
            "user": self.user,
            "jsonData": {
                "database": self.database,
                "sslmode": self.sslmode.value,
                "timescaledb": self.timescaledb,
            },
            "secureJsonData": {"password": self.password},
        }


@dataclass(frozen=True, slots=True)
class Dashboard:
    uid: str
    title: str
    model: dict[str, Any]
    file: str


# --- Grafana's answers, as its HTTP API documentation describes them ------------------------


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Health(_Answer):
    version: str | None = None


class _Folder(_Answer):
    uid: str
    title: str
    # Set on a folder inside another one (nested folders).
    parent_uid: str | None = Field(default=None, alias="folderUid")


class _DataSource(_Answer):
    uid: str
    name: str
    type: str
    url: str = ""


class _Saved(_Answer):
    uid: str
    url: str
    version: int


A = TypeVar("A", bound=_Answer)


def _read(model: type[A], answer: object, url: str, call: str) -> A:
    try:
        return model.model_validate(answer)
    except ValidationError:
        raise PushRefused(
            f"{url} answered {call} with what Grafana does not send ({str(answer)[:200]}): "
            "check --grafana-url"
        ) from None


# --- the dashboards pushed ------------------------------------------------------------------


def packaged_dashboards() -> Traversable:
    """The generated dashboards that come with fleetmark (`python -m dashboards build`)."""
    return resources.files("dashboards") / "json"


def load_dashboards(source: Traversable) -> list[Dashboard]:
    """Every dashboard JSON file in `source`, by file name; a file that is not a dashboard
    with a uid and a title is refused, naming it."""
    files = (
        sorted((item for item in source.iterdir() if item.name.endswith(".json")), key=str)
        if source.is_dir()
        else []
    )
    if not files:
        raise PushRefused(
            f"no dashboard JSON files in {source}: build them with `python -m dashboards build`, "
            "or point --from at a directory of dashboard JSON files"
        )
    dashboards: dict[str, Dashboard] = {}
    for file in files:
        try:
            model = json.loads(file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise PushRefused(f"{file} is not JSON: {exc}") from None
        uid = model.get("uid") if isinstance(model, dict) else None
        title = model.get("title") if isinstance(model, dict) else None
        if not (isinstance(uid, str) and uid and isinstance(title, str) and title):
            raise PushRefused(f"{file} is not a dashboard: it needs a `uid` and a `title`")
        if uid in dashboards:
            raise PushRefused(f"{file} has the uid {uid!r} of another dashboard in {source}")
        dashboards[uid] = Dashboard(uid, title, model, str(file))
    return list(dashboards.values())


# --- talking to Grafana -----------------------------------------------------------------------


def _message(error: GrafanaException) -> str:
    body = error.response
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(body or error.message)[:200]


class Grafana:
    """The calls a push makes, through grafana-client; each failure becomes a PushRefused
    that names the step, what Grafana said and what to do."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self._api = GrafanaApi.from_url(url, credential=token, timeout=TIMEOUT_SECONDS)

    @contextmanager
    def _asking(
        self,
        action: str,
        *,
        forbidden: str = "",
        refused: str = ": fix what Grafana objects to and push again",
    ) -> Iterator[None]:
        """`forbidden` and `refused` say what to do about a 403 and about any other 4xx."""
        at = f"Grafana at {self.url}"
        try:
            yield
        except GrafanaUnauthorizedError:
            raise PushRefused(
                f"{at} refused the token when asked to {action} (401 Unauthorized): give a "
                "valid service account token of this Grafana in --token-file (or "
                "FLEETMARK_GRAFANA_TOKEN); it may have expired or been revoked"
            ) from None
        except GrafanaServerError as exc:
            raise PushRefused(
                f"{at} failed when asked to {action} (HTTP {exc.status_code}: {_message(exc)}): "
                "Grafana, or a proxy in front of it, is in trouble; look at its log and push "
                "again once it answers (a push can be repeated safely)"
            ) from None
        except Timeout:
            raise PushRefused(
                f"{at} did not answer within {TIMEOUT_SECONDS:.0f} s when asked to {action}: "
                "check that it is running and --grafana-url is right, then push again"
            ) from None
        except GrafanaClientError as exc:
            if exc.status_code == 403:
                raise PushRefused(
                    f"{at} does not let the token's service account {action} "
                    f"(403 Forbidden: {_message(exc)}){forbidden}"
                ) from None
            raise PushRefused(
                f"{at} refused to {action} (HTTP {exc.status_code}: {_message(exc)}){refused}"
            ) from None
        except ValueError:  # before OSError: the HTTP library's JSON errors are both
            raise PushRefused(
                f"{self.url} does not answer as Grafana does (no JSON when asked to {action}): "
                "check --grafana-url; if Grafana is served under a sub-path, include it"
            ) from None
        except (GrafanaException, OSError) as exc:
            # grafana-client passes its HTTP library's connection errors on; they are OSErrors.
            raise PushRefused(
                f"{at} is unreachable ({exc}): check --grafana-url (or FLEETMARK_GRAFANA_URL) "
                "and that Grafana is running"
            ) from None

    def version(self) -> str | None:
        """Grafana's version (GET /api/health); None when this Grafana hides it."""
        with self._asking("tell its version"):
            try:
                answer = self._api.client.GET("/health")
            except GrafanaClientError as exc:
                if exc.status_code != 404:
                    raise
                raise PushRefused(
                    f"{self.url} does not answer as Grafana does (GET /api/health: HTTP 404): "
                    "check --grafana-url; if Grafana is served under a sub-path, include it"
                ) from None
        return _read(_Health, answer, self.url, "GET /api/health").version

    def find_folder(self, title: str) -> _Folder | None:
        """The top-level folder of that exact title (search matches parts of titles)."""
        with self._asking(f"search for the folder {title!r}"):
            hits = self._api.search.search_dashboards(query=title, type_="dash-folder")
        if not isinstance(hits, list):
            raise PushRefused(
                f"{self.url} answered GET /api/search with what Grafana does not send "
                f"({str(hits)[:200]}): check --grafana-url"
            )
        folders = [_read(_Folder, hit, self.url, "GET /api/search") for hit in hits]
        return next((f for f in folders if f.title == title and f.parent_uid is None), None)

    def create_folder(self, title: str) -> _Folder:
        with self._asking(
            f"create the folder {title!r}",
            forbidden=": give it the Editor role, or create the folder in Grafana and push again",
            refused=": choose another --folder, or fix what Grafana objects to and push again",
        ):
            answer = self._api.folder.create_folder(title)
        return _read(_Folder, answer, self.url, "POST /api/folders")

    def datasource(self) -> _DataSource | None:
        with self._asking(f"look up the data source {DATASOURCE_UID!r}"):
            try:
                answer = self._api.datasource.get_datasource_by_uid(DATASOURCE_UID)
            except GrafanaClientError as exc:
                if exc.status_code == 404:
                    return None
                raise
        return _read(_DataSource, answer, self.url, "GET /api/datasources/uid")

    def create_datasource(self, connection: Connection) -> None:
        with self._asking(
            f"create the data source {DATASOURCE_NAME!r}",
            forbidden=": creating a data source takes the Admin role; give it to the service "
            "account, or have an administrator push once (later pushes need only Editor)",
        ):
            try:
                self._api.datasource.create_datasource(connection.datasource())
            except GrafanaClientError as exc:
                if exc.status_code != 409:
                    raise
                raise PushRefused(
                    f"Grafana at {self.url} already has a data source named {DATASOURCE_NAME!r} "
                    f"but with another uid ({_message(exc)}); the dashboards look their data "
                    f"source up by the uid {DATASOURCE_UID!r}: rename or delete that data source "
                    "in Grafana and push again"
                ) from None

    def store(self, dashboard: Dashboard, folder_uid: str) -> _Saved:
        """Create or overwrite the dashboard of this uid in the folder."""
        body = {
            "dashboard": {**dashboard.model, "id": None},
            "folderUid": folder_uid,
            "overwrite": True,
            "message": PUSH_MESSAGE,
        }
        with self._asking(
            f"store the dashboard {dashboard.uid!r}",
            forbidden=": give it the Editor role (or edit rights on the folder)",
            refused=f": the dashboard comes from {dashboard.file}; rebuild it (`python -m "
            "dashboards build`) or fix it, and push again",
        ):
            try:
                answer = self._api.dashboard.update_dashboard(body)
            except GrafanaClientError as exc:
                if exc.status_code != 412:
                    raise
                raise self._precondition_failed(dashboard, exc) from None
        return _read(_Saved, answer, self.url, "POST /api/dashboards/db")

    def _precondition_failed(self, dashboard: Dashboard, exc: GrafanaClientError) -> PushRefused:
        body = exc.response if isinstance(exc.response, dict) else {}
        status = body.get("status")
        said = f"{_message(exc)} (412 {status or 'Precondition Failed'})"
        refused = f"Grafana at {self.url} refused the dashboard {dashboard.uid!r}: {said}"
        if status == "version-mismatch":
            return PushRefused(
                f"{refused}: it was saved in Grafana while this push stored it (another push, "
                "or someone in the editor); push again to overwrite it with fleetmark's version"
            )
        if status == "name-exists":
            return PushRefused(
                f"{refused}: the folder already holds a dashboard titled {dashboard.title!r} "
                "under another uid; rename or delete that one in Grafana and push again"
            )
        if status == "plugin-dashboard":
            return PushRefused(
                f"{refused}: a Grafana plugin owns a dashboard of that uid; remove the plugin's "
                "dashboard and push again"
            )
        return PushRefused(refused)


# --- the push ---------------------------------------------------------------------------------


def _say(text: str) -> None:
    """A line of progress, unwrapped so that a URL stays whole, and no markup read into it."""
    console.print(text, highlight=False, soft_wrap=True, markup=False)


def check_version(url: str, version: str | None) -> None:
    if version is None:
        return
    found = _VERSION.match(version)
    if found is None:
        raise PushRefused(
            f"Grafana at {url} reports the version {version!r}, which is not a Grafana version: "
            "check --grafana-url"
        )
    if tuple(int(part) for part in found.groups()) < MINIMUM_GRAFANA:
        minimum = ".".join(str(part) for part in MINIMUM_GRAFANA)
        raise PushRefused(
            f"Grafana at {url} is version {version}, older than {minimum}, which fleetmark's "
            f"dashboards need (their data source type {DATASOURCE_TYPE} came with it): "
            f"upgrade Grafana to {minimum} or newer and push again"
        )


def push(
    grafana: Grafana,
    dashboards: list[Dashboard],
    *,
    folder: str,
    connection: Connection | None,
    missing: list[str],
) -> int:
    """Check, then write: the data source if missing, the folder if missing, each dashboard;
    how many dashboards were stored. `missing` names the connection options not given, which
    matter only when the data source is missing."""
    version = grafana.version()
    check_version(grafana.url, version)
    _say(f"Grafana {version or '(version not shown)'} at {grafana.url}")

    existing = grafana.datasource()
    if existing is None and connection is None:
        raise PushRefused(
            f"Grafana at {grafana.url} has no data source {DATASOURCE_UID!r} yet, and to create "
            f"it push needs {', '.join(missing)}: how Grafana reaches the hub's database, as the "
            "read-only role (`fleetmark db grant-readonly ROLE`)"
        )
    if existing is not None and existing.type not in (DATASOURCE_TYPE, "postgres"):
        raise PushRefused(
            f"Grafana at {grafana.url} has a data source with the uid {DATASOURCE_UID!r} of the "
            f"type {existing.type!r}, not PostgreSQL: the dashboards read the hub's database "
            "through it; delete it in Grafana and push again"
        )

    if existing is None:
        assert connection is not None
        grafana.create_datasource(connection)
        _say(f"data source {DATASOURCE_NAME!r}: created ({connection.describe()})")
    else:
        _say(
            f"data source {DATASOURCE_NAME!r}: exists ({existing.url or existing.type}), "
            "left as it is"
        )

    found = grafana.find_folder(folder)
    target = found or grafana.create_folder(folder)
    _say(f"folder {folder!r}: {'exists' if found else 'created'} (uid {target.uid})")

    for dashboard in dashboards:
        saved = grafana.store(dashboard, target.uid)
        _say(
            f"dashboard {dashboard.uid} ({dashboard.title}): version {saved.version}, "
            f"{urljoin(grafana.url, saved.url)}"
        )
    return len(dashboards)


# --- the command ------------------------------------------------------------------------------


def _grafana_url(url: str) -> str:
    parts = urlsplit(url)
    if "@" in parts.netloc or (parts.scheme not in ("http", "https") and "@" in url):
        # Not shown: what stands before the @ may be a password.
        raise fail(
            "--grafana-url (FLEETMARK_GRAFANA_URL) holds a user name or password: push signs in "
            "with the service account token alone; give Grafana's URL without them"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(
            f"--grafana-url must be Grafana's http(s) URL, such as https://grafana.example.com, "
            f"got {url!r}"
        )
    # grafana-client puts `api/` right after the path: Grafana under a sub-path needs its slash.
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/"))


def _secret(file: Path | None, option: str, variable: str) -> str | None:
    """A secret from its file when one is given (it wins over the variable), else from the
    variable: never from the command line, where other users of the machine can read it."""
    if file is not None:
        return read_secret_file(file, option)
    return os.environ.get(variable) or None


dashboards_app = typer.Typer(help="fleetmark's Grafana dashboards.", no_args_is_help=True)


@dashboards_app.command("push")
def push_command(
    grafana_url: Annotated[
        str,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_URL",
            help="Grafana's URL, with its sub-path if it is served under one.",
        ),
    ],
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_TOKEN_FILE",
            help="A file holding a service account token: Editor, or Admin when the data "
            "source is created. Or give the token in FLEETMARK_GRAFANA_TOKEN.",
            show_default=False,
        ),
    ] = None,
    folder: Annotated[
        str, typer.Option(help="The Grafana folder the dashboards go to (created if missing).")
    ] = DEFAULT_FOLDER,
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A directory of dashboard JSON files to push instead of fleetmark's own.",
            show_default=False,
        ),
    ] = None,
    db_host: Annotated[
        str | None,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_DB_HOST",
            help="The hub's database as Grafana reaches it: host:port.",
        ),
    ] = None,
    db_name: Annotated[
        str | None,
        typer.Option(envvar="FLEETMARK_GRAFANA_DB_NAME", help="The hub's database name."),
    ] = None,
    db_user: Annotated[
        str | None,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_DB_USER",
            help="The read-only role Grafana connects as (`fleetmark db grant-readonly ROLE`).",
        ),
    ] = None,
    db_password_file: Annotated[
        Path | None,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_DB_PASSWORD_FILE",
            help="A file holding that role's password, which Grafana keeps encrypted. Or give "
            "it in FLEETMARK_GRAFANA_DB_PASSWORD.",
            show_default=False,
        ),
    ] = None,
    db_sslmode: Annotated[
        SSLMode,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_DB_SSLMODE",
            help="TLS from Grafana to the database (disable only on a private network).",
        ),
    ] = SSLMode.require,
    timescaledb: Annotated[
        bool,
        typer.Option(
            envvar="FLEETMARK_GRAFANA_TIMESCALEDB",
            help="The data source's TimescaleDB option ($__timeGroup as time_bucket); "
            "only for a store on TimescaleDB.",
        ),
    ] = False,
) -> None:
    """Push the dashboards into Grafana: the folder and data source created if missing, each
    dashboard overwritten by its uid. The --db-* options are needed only to create the data
    source."""
    url = _grafana_url(grafana_url)
    token = _secret(token_file, "--token-file", "FLEETMARK_GRAFANA_TOKEN")
    if token is None:
        raise fail(
            "a Grafana service account token is needed: give the file that holds it with "
            "--token-file (or FLEETMARK_GRAFANA_TOKEN_FILE), or the token in "
            "FLEETMARK_GRAFANA_TOKEN"
        )
    db_password = _secret(db_password_file, "--db-password-file", "FLEETMARK_GRAFANA_DB_PASSWORD")
    options = {
        "--db-host (FLEETMARK_GRAFANA_DB_HOST)": db_host,
        "--db-name (FLEETMARK_GRAFANA_DB_NAME)": db_name,
        "--db-user (FLEETMARK_GRAFANA_DB_USER)": db_user,
        "--db-password-file (or FLEETMARK_GRAFANA_DB_PASSWORD)": db_password,
    }
    connection = (
        Connection(db_host, db_name, db_user, db_password, db_sslmode, timescaledb)
        if db_host and db_name and db_user and db_password
        else None
    )
    missing = [option for option, value in options.items() if not value]
    try:
        dashboards = load_dashboards(packaged_dashboards() if source is None else source)
        count = push(
            Grafana(url, token), dashboards, folder=folder, connection=connection, missing=missing
        )
    except PushRefused as exc:
        raise fail(str(exc)) from None
    _say(f"pushed {count} dashboard{'' if count == 1 else 's'} into the folder {folder!r}")


def register(app: typer.Typer) -> None:
    app.add_typer(dashboards_app, name="dashboards")

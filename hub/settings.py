"""Hub configuration: one settings object, built once at start-up from FLEETMARK_* variables."""

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import platformdirs
from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub.client.secret_files import read_secret_file
from hub.git.urls import is_local_url

DEVELOPMENT_TOKEN_SECRET = "fleetmark-development-secret"  # noqa: S105 - refused outside development


def _seconds_as_number(value: object) -> object:
    """A plain number in a variable ("300", "2.5") is seconds, as for every other duration."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


# A duration given as seconds ("300") or as ISO 8601 ("PT5M").
Interval = Annotated[timedelta, BeforeValidator(_seconds_as_number)]


def _public_url(value: str) -> str:
    """An http(s) base URL, without a trailing slash: nothing in it a link could not carry."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading the port checks it
    except ValueError as exc:
        raise ValueError(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "must be an http:// or https:// URL with a host, such as https://fleetmark.example.com"
        )
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError(
            "must hold no user, query or fragment: it is the base of the links the hub gives out"
        )
    return value.rstrip("/")


# The hub's public base URL, as the links it gives out start.
PublicUrl = Annotated[str, AfterValidator(_public_url)]


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("fleetmark"))


# Secret settings that may be read from a file instead, and the setting naming that file.
_SECRET_FILES = {
    "token_secret": "token_secret_file",
    "database_url": "database_url_file",
    "metrics_token": "metrics_token_file",
}


class HubSettings(BaseSettings):
    # Errors never repeat the input: it holds the secrets.
    model_config = SettingsConfigDict(
        env_prefix="FLEETMARK_", extra="ignore", hide_input_in_errors=True
    )

    mode: Literal["development", "production"] = Field(
        default="development",
        description=(
            "development or production (the image's). Production refuses the default token "
            "secret, asks a token for every page and for /metrics, and logs JSON."
        ),
    )
    database_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL URL; without one, an embedded PostgreSQL in data_dir is used.",
    )
    database_url_file: Path | None = Field(
        default=None, description="A file holding database_url, instead of the variable."
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description=(
            "Where the embedded PostgreSQL, the git clones and admin.token live; default the "
            "user data directory (~/.local/share/fleetmark on Linux). Same as --data-dir."
        ),
    )
    token_secret: SecretStr = Field(
        default=SecretStr(DEVELOPMENT_TOKEN_SECRET),
        description=(
            "Key of the HMAC under which tokens are stored: your own, at least 32 characters, "
            "outside development. Changing it invalidates every token."
        ),
    )
    token_secret_file: Path | None = Field(
        default=None, description="A file holding token_secret, instead of the variable."
    )
    admin_token_file: Path | None = Field(
        default=None,
        description=(
            "A file holding the admin token the hub creates, named admin, when it starts and no "
            "admin token exists; unset, it makes one and keeps it in data_dir/admin.token."
        ),
    )
    host: str = Field(
        default="127.0.0.1", description="Address `fleetmark serve` listens on (--host)."
    )
    port: int = Field(default=8080, description="Port `fleetmark serve` listens on (--port).")
    public_url: PublicUrl | None = Field(
        default=None,
        description=(
            "The hub's base URL as people and other systems reach it (https://fleetmark."
            "example.com, or with a path prefix); links the hub gives out, such as a gate "
            "decision's evidence_url, start with it. Unset: the URL each request reached the "
            "hub at."
        ),
    )
    max_report_bytes: int = Field(
        default=4 * 1024 * 1024,
        gt=0,
        description="Largest report body accepted (4 MiB); a larger one is answered 413.",
    )
    request_header_timeout: float = Field(
        default=10.0,
        gt=0,
        description=(
            "Seconds a client has, from connecting or from a request's first byte, to send the "
            "request's headers; then it is answered 408 and the connection closed."
        ),
    )
    request_body_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a client has to send a request's body once its headers are in.",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description=(
            "Comma-separated addresses or networks of the proxies whose X-Forwarded-Proto and "
            "X-Forwarded-For `fleetmark serve` believes (`*`: any); the scheme decides whether "
            "the sign-in cookie is Secure."
        ),
    )
    sign_in_lifetime: Interval = Field(
        default=timedelta(hours=8),
        ge=timedelta(minutes=1),
        description=(
            "How long a sign-in to the pages lasts (seconds or ISO 8601); then the browser is "
            "asked for a token again."
        ),
    )
    stale_after_seconds: int = Field(
        default=600,
        gt=0,
        description="Seconds without a report after which a cluster counts as stale.",
    )
    database_pool_size: int = Field(
        default=10,
        gt=0,
        description=(
            "Database connections per hub process, as many again in overflow; report ingest "
            "has a pool of twice this size of its own."
        ),
    )
    database_pool_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a request waits for a free database connection before a 503.",
    )
    database_parallel_workers: int = Field(
        default=0,
        ge=0,
        description=(
            "PostgreSQL parallel workers one of the hub's queries may use "
            "(max_parallel_workers_per_gather). 0 keeps each query on one core: the hub runs "
            "many short queries at once, and a query's workers would take cores from the others."
        ),
    )
    ingest_synchronous_commit: bool = Field(
        default=True,
        description=(
            "Wait for the WAL flush before answering a report, so that a report answered 2xx "
            "survives a PostgreSQL crash. Off: ingest costs less database CPU, but a crash "
            "loses the reports of the last fraction of a second, which the agents were told "
            "were stored and never send again."
        ),
    )
    ingest_max_clock_skew: Interval = Field(
        default=timedelta(minutes=5),
        ge=timedelta(0),
        description=(
            "How far ahead of the hub's clock a report's times may be (seconds or ISO 8601); "
            "a report with a time further ahead is refused with 422."
        ),
    )
    ingest_max_backdate: Interval = Field(
        default=timedelta(days=1),
        ge=timedelta(0),
        description=(
            "How much earlier than a report's observed_at the time an object's cluster says "
            "its state last changed is believed, when the hub first sees the object: that is "
            "when it began running its revision and being Ready (seconds or ISO 8601)."
        ),
    )
    agent_placement: Literal["operator", "first-report"] = Field(
        default="operator",
        description=(
            "operator: an admin places each cluster (at registration or `fleetmark clusters "
            "place`); a report's environment and cluster type are only recorded. first-report: "
            "an unplaced cluster's first claim places it, into a declared environment only."
        ),
    )
    log_format: Literal["console", "json"] | None = Field(
        default=None,
        description="console or json; unset: console in development, json in production.",
    )
    repositories_file: Path | None = Field(
        default=None, description="YAML file listing the GitOps repositories to harvest."
    )
    harvest_enabled: bool = Field(
        default=True,
        description=(
            "Run the periodic harvest. Off: no repository is fetched "
            "(`fleetmark harvest` still runs one on demand)."
        ),
    )
    harvest_interval: Interval = Field(
        default=timedelta(minutes=1),
        gt=timedelta(0),
        description="How often the hub harvests its repositories (seconds or ISO 8601).",
    )
    git_cache_dir: Path | None = Field(
        default=None, description="Where repositories are cloned; default: data_dir/git."
    )
    git_timeout: float = Field(default=300.0, gt=0, description="Seconds one fetch may take.")
    harvest_max_file_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="Larger files in a GitOps repo are recorded as harvest errors, not read.",
    )
    git_credentials_dir: Path | None = Field(
        default=None,
        description="The only folder whose files the admin API may name as git credentials.",
    )
    allow_local_repositories: bool = Field(
        default=False,
        description=(
            "In production mode, harvest and schedule repositories on the hub's own file "
            "system (file:// URLs, paths); development mode always may."
        ),
    )
    discovery_allowed_urls: list[str] | None = Field(
        default=None,
        description=(
            "Hosts (`github.com`) or URL prefixes (`https://github.com/contoso`), as a JSON list, "
            "that repositories named by harvested reconciler manifests and by the control plane "
            "may be on; unset: any. Repositories the operator configures are not limited."
        ),
    )
    history_retention: Interval = Field(
        default=timedelta(days=400),
        ge=timedelta(days=1),
        description=(
            "How long the history of reconciler states is kept (seconds or ISO 8601); older "
            "transitions are dropped, and DORA ranges reaching further back are refused."
        ),
    )
    heartbeat_retention: Interval = Field(
        default=timedelta(days=90),
        ge=timedelta(days=1),
        description="How long the per-cluster report counts are kept (seconds or ISO 8601).",
    )
    rollup_retention: Interval = Field(
        default=timedelta(days=730),
        ge=timedelta(days=1),
        description=(
            "How long the hourly rollups of the history (reports and state changes per cluster "
            "and hour) are kept (seconds or ISO 8601); they outlive the history they sum."
        ),
    )
    compress_after: Interval = Field(
        default=timedelta(days=14),
        ge=timedelta(hours=1),
        description=(
            "On TimescaleDB, how old history chunks are before they are compressed (seconds "
            "or ISO 8601)."
        ),
    )
    metrics_refresh_interval: Interval = Field(
        default=timedelta(seconds=15),
        ge=timedelta(0),
        description=(
            "How old the fleet gauges of /metrics may get before a scrape reads them from the "
            "store again (seconds or ISO 8601); scrapes in between cost no query."
        ),
    )
    metrics_public: bool = Field(
        default=False,
        description=(
            "In production mode, serve /metrics without a token; otherwise it needs a token "
            "of scope metrics (or admin). Development mode always serves it."
        ),
    )
    metrics_port: int | None = Field(
        default=None,
        gt=0,
        lt=65536,
        description=(
            "Serve /metrics on this port of its own, and only there; unset: on the hub's port."
        ),
    )
    metrics_token: SecretStr | None = Field(
        default=None,
        description=(
            "A token /metrics takes besides the stored ones of scope metrics or admin, checked "
            "without the store, so a scrape still answers while the store is down (at least "
            "32 characters; Prometheus reads it from the same file)."
        ),
    )
    metrics_token_file: Path | None = Field(
        default=None, description="A file holding metrics_token, instead of the variable."
    )
    metrics_per_cluster: bool = Field(
        default=False,
        description=(
            "Add series per cluster to /metrics (agent state, last report, objects by "
            "state): a label value per cluster, so off by default."
        ),
    )
    drift_interval: Interval = Field(
        default=timedelta(seconds=30),
        gt=timedelta(0),
        description=(
            "How often the hub judges the fleet's drift and updates the drift history "
            "(seconds or ISO 8601); drift answers are at most this old."
        ),
    )
    drift_grace: Interval = Field(
        default=timedelta(minutes=5),
        ge=timedelta(0),
        description=(
            "How long a cluster's drift must last before fleetmark.drift.started counts it "
            "(seconds or ISO 8601): a cluster behind during a rollout is a rollout, not "
            "drift."
        ),
    )
    env_diff_interval: Interval = Field(
        default=timedelta(seconds=30),
        gt=timedelta(0),
        description=(
            "How often the hub sums up what the fleet's clusters run for the environment diff "
            "(seconds or ISO 8601); its deployed side is at most this old."
        ),
    )
    dora_interval: Interval = Field(
        default=timedelta(minutes=5),
        gt=timedelta(0),
        description=(
            "How often the hub brings its rollup of DORA rollouts up to date (seconds or ISO "
            "8601); DORA answers are at most this old."
        ),
    )
    gate_answers_interval: Interval = Field(
        default=timedelta(minutes=1),
        gt=timedelta(0),
        description=(
            "How often the hub judges the gate for the newest platform commits and workload "
            "versions of each environment and keeps the answers for dashboards and alert rules "
            "(seconds or ISO 8601); kept answers are at most this old."
        ),
    )
    gate_answers_newest: int = Field(
        default=5,
        ge=1,
        le=50,
        description=(
            "How many of the newest platform commits of each environment, and of the newest "
            "versions of each workload in it, the kept gate answers cover."
        ),
    )
    gate_answers_soak: Interval = Field(
        default=timedelta(minutes=10),
        ge=timedelta(0),
        description=(
            "The soak the kept gate answers are judged with (seconds or ISO 8601), as the "
            "endpoint's `soak`."
        ),
    )
    dora_settle_after: Interval = Field(
        default=timedelta(days=1),
        gt=timedelta(0),
        description=(
            "How long after a rollout completed (and, had it failed, was restored) the DORA "
            "job still judges it again, for reports that arrive late (seconds or ISO 8601); "
            "then its verdict is kept."
        ),
    )
    rollout_stall_after: Interval = Field(
        default=timedelta(minutes=30),
        gt=timedelta(0),
        description=(
            "How long a rollout may go without another expected cluster reaching it before it "
            "counts as stalled (seconds or ISO 8601); the dashboards' rollouts and the "
            "rollout stalled alert follow it."
        ),
    )
    halt_on_regression: list[str] = Field(
        default_factory=list,
        description=(
            "The environments whose clear suspects halt their promotion, as a JSON list "
            '(["prod"]); unset: none (docs/suspects.md).'
        ),
    )
    suspect_window: Interval = Field(
        default=timedelta(minutes=15),
        gt=timedelta(0),
        description=(
            "How soon after applying a commit or version a cluster turning not Ready counts as "
            "a regression after it (seconds or ISO 8601)."
        ),
    )
    halts_interval: Interval = Field(
        default=timedelta(minutes=1),
        gt=timedelta(0),
        description=(
            "How often the halts job judges the suspects of the halting environments "
            "(seconds or ISO 8601)."
        ),
    )
    suspect_min_regressions: int = Field(
        default=3,
        ge=1,
        description="How many exposed clusters must regress after a change to make it a suspect.",
    )
    event_delivery_interval: Interval = Field(
        default=timedelta(seconds=5),
        gt=timedelta(0),
        description=(
            "How often the hub sends the events due to subscriptions (seconds or ISO 8601): "
            "a new event waits at most this long."
        ),
    )
    event_retry_window: Interval = Field(
        default=timedelta(hours=24),
        gt=timedelta(0),
        description=(
            "How long a delivery that fails is retried, with backoff, from its first attempt "
            "(seconds or ISO 8601); then it is dead, listed and retryable by hand."
        ),
    )
    event_retention: Interval = Field(
        default=timedelta(days=14),
        ge=timedelta(hours=1),
        description=(
            "How long events, and their delivered or dead deliveries, are kept (seconds or "
            "ISO 8601); a pending delivery keeps its event."
        ),
    )
    webhook_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a subscription's receiver has to answer one delivery.",
    )
    webhook_allow_private: bool = Field(
        default=False,
        description=(
            "Let subscriptions send over plain http and to loopback, link-local, private and "
            "unique-local addresses (receivers inside the cluster, tests)."
        ),
    )
    schedule_control_plane: str | None = Field(
        default=None,
        description=(
            "Control-plane repository (URL or local path) whose branches the hub schedules "
            "from; unset: no scheduling job. Needs schedule_gitops."
        ),
    )
    schedule_gitops: str | None = Field(
        default=None,
        description="Platform GitOps repository (URL or local path) the scheduler commits to.",
    )
    schedule_environments: list[str] | None = Field(
        default=None,
        description=(
            'Environments to schedule, as a JSON list (["dev", "stage"]); '
            "unset: every environment the control plane declares."
        ),
    )
    schedule_mode: Literal["direct", "branch"] = Field(
        default="direct",
        description=(
            "direct: commit to the environment branch; branch: to a new "
            "deployment/<timestamp>-<environment> branch, to be merged by a pull request."
        ),
    )
    schedule_interval: Interval = Field(
        default=timedelta(minutes=1),
        gt=timedelta(0),
        description="How often the hub follows the control plane (seconds or ISO 8601).",
    )
    schedule_author_name: str = Field(
        default="fleetmark scheduler", description="Author of the scheduler's commits."
    )
    schedule_author_email: str = Field(
        default="scheduler@fleetmark.invalid", description="Author e-mail of its commits."
    )
    template_render_timeout: float = Field(
        default=2.0,
        gt=0,
        description=(
            "Seconds the templates of one assignment may take to render; an assignment taking "
            "longer fails with a template error, and the others are rendered."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _read_secret_files(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, file_setting in _SECRET_FILES.items():
            path = data.get(file_setting)
            if path is None:
                continue
            variable = f"FLEETMARK_{name.upper()}"
            file_variable = f"FLEETMARK_{file_setting.upper()}"
            if data.get(name) is not None:
                raise ValueError(f"{variable} and {file_variable} are both set: set one of them")
            data = {**data, name: read_secret_file(Path(path), file_variable)}
        return data

    @model_validator(mode="after")
    def _refuse_default_secrets(self) -> "HubSettings":
        if self.mode != "development":
            if self.token_secret.get_secret_value() == DEVELOPMENT_TOKEN_SECRET:
                raise ValueError(
                    "FLEETMARK_TOKEN_SECRET must be set to a secret of your own (or "
                    "FLEETMARK_TOKEN_SECRET_FILE to a file holding it) when FLEETMARK_MODE is "
                    "not 'development'"
                )
            if len(self.token_secret.get_secret_value()) < 32:
                raise ValueError("FLEETMARK_TOKEN_SECRET must be at least 32 characters long")
        return self

    @model_validator(mode="after")
    def _schedule_both_repositories(self) -> "HubSettings":
        if (self.schedule_control_plane is None) != (self.schedule_gitops is None):
            raise ValueError(
                "FLEETMARK_SCHEDULE_CONTROL_PLANE and FLEETMARK_SCHEDULE_GITOPS are set together: "
                "the scheduler reads the one and commits to the other"
            )
        return self

    @model_validator(mode="after")
    def _local_schedule_repositories(self) -> "HubSettings":
        for name in ("schedule_control_plane", "schedule_gitops"):
            location = getattr(self, name)
            if (
                location is not None
                and not self.local_repositories_allowed
                and (location.startswith((".", "~")) or is_local_url(location))
            ):
                raise ValueError(
                    f"FLEETMARK_{name.upper()} is a local path, refused when FLEETMARK_MODE is "
                    "not 'development' unless FLEETMARK_ALLOW_LOCAL_REPOSITORIES=true"
                )
        return self

    @model_validator(mode="after")
    def _metrics_token_long_enough(self) -> "HubSettings":
        if self.metrics_token is not None and len(self.metrics_token.get_secret_value()) < 32:
            raise ValueError("FLEETMARK_METRICS_TOKEN must be at least 32 characters long")
        return self

    @model_validator(mode="after")
    def _metrics_port_of_its_own(self) -> "HubSettings":
        if self.metrics_port == self.port:
            raise ValueError(
                f"FLEETMARK_METRICS_PORT is FLEETMARK_PORT ({self.port}): give /metrics a port "
                "of its own, or leave it unset to serve it on the hub's port"
            )
        return self

    @property
    def metrics_need_token(self) -> bool:
        return self.mode != "development" and not self.metrics_public

    @property
    def stale_after(self) -> timedelta:
        return timedelta(seconds=self.stale_after_seconds)

    @property
    def local_repositories_allowed(self) -> bool:
        return self.mode == "development" or self.allow_local_repositories

    @property
    def effective_public_url(self) -> str:
        """The base of the links the hub's jobs give out, which no request tells them:
        public_url, else the address it serves on."""
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def embedded_data_dir(self) -> Path:
        return self.data_dir / "postgres"

    @property
    def effective_git_cache_dir(self) -> Path:
        return self.git_cache_dir if self.git_cache_dir is not None else self.data_dir / "git"

    @property
    def effective_log_format(self) -> Literal["console", "json"]:
        if self.log_format is not None:
            return self.log_format
        return "console" if self.mode == "development" else "json"

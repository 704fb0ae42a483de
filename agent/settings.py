"""Agent configuration: one settings object, built at start-up from FLEETMARK_AGENT_* variables.

The runner hands each part its values; nothing else reads the environment. Lists take commas
or a JSON list, labels `key=value,…` or a JSON object, durations seconds or ISO 8601 (`PT5M`).
"""

import json
import socket
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AnyHttpUrl, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from agent.report import DEFAULT_MAX_REPORT_BYTES, ClusterIdentity
from agent.sources import WATCHED_KINDS, WatchedKind

__all__ = ["DEFAULT_ROOT_OBJECT", "AgentSettings"]

# Where a Flux bootstrap puts the reconciler that tracks the platform GitOps repository.
DEFAULT_ROOT_OBJECT = "Kustomization/flux-system/flux-system"
# The namespace a pod runs in, as Kubernetes mounts it with the service account token.
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _split(value: object) -> object:
    """A comma-separated string (or a JSON list) as a list of trimmed, non-empty items."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [item.strip() for item in text.split(",") if item.strip()]
    return value


def _seconds(value: object) -> object:
    """A duration given as a number of seconds in a string ("5", "0.5"), as a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value  # ISO 8601 (PT5M) and [-][DD]HH:MM:SS are pydantic's to parse
    return value


def _pairs(value: object) -> object:
    """`key=value,key=value` (or a JSON object) as a mapping."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text)
        pairs: dict[str, str] = {}
        for item in text.split(","):
            if not item.strip():
                continue
            key, separator, label = item.partition("=")
            if not separator or not key.strip():
                raise ValueError(f"label {item.strip()!r}: expected key=value")
            pairs[key.strip()] = label.strip()
        return pairs
    return value


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLEETMARK_AGENT_", extra="ignore")

    # The hub and this cluster's identity there.
    hub_url: AnyHttpUrl = Field(description="Base URL of the hub, e.g. https://fleetmark.example")
    token_file: Path = Field(
        default=Path("/var/run/secrets/fleetmark/token"),
        description="File holding the cluster token; read at start-up and again when it changes.",
    )
    hub_ca_file: Path | None = Field(
        default=None, description="CA bundle that signs the hub's certificate (default: system)."
    )
    hub_timeout: timedelta = Field(
        default=timedelta(seconds=5),
        gt=timedelta(0),
        description="Longest one report request may take; shorter than renew_deadline.",
    )
    max_report_bytes: int = Field(
        default=DEFAULT_MAX_REPORT_BYTES,
        gt=0,
        description="Largest report body the hub takes, until the hub says (it does in every "
        "reply); full snapshots over it go in parts.",
    )
    cluster_name: str = Field(min_length=1, max_length=253)
    environment: str | None = Field(
        default=None, description="Environment; inferred from the root reconciler when unset."
    )
    cluster_type: str | None = Field(
        default=None, description="Cluster type; inferred from the root reconciler when unset."
    )
    labels: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    instance: str = Field(
        default_factory=socket.gethostname,
        min_length=1,
        max_length=253,
        description="This agent's name in reports: the pod (or host) name.",
    )

    # What is watched.
    namespaces: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Namespaces to watch; empty means all namespaces."
    )
    kinds: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [kind.kind for kind in WATCHED_KINDS],
        description="Kinds to watch, by kind or plural (Kustomization or kustomizations).",
    )
    root_object: str = Field(
        default=DEFAULT_ROOT_OBJECT,
        description="Kind/namespace/name of the reconciler that tracks the platform GitOps "
        "repository; environment and cluster type are inferred from it.",
    )
    state_file: Path | None = Field(
        default=None,
        description="Report from this state file instead of Kubernetes (hosts without a cluster).",
    )
    state_file_max_age: timedelta | None = Field(
        default=None, description="A state file older than this reports its entries as Unknown."
    )

    # Kubernetes access: in-cluster by default, a kubeconfig when not in a pod, or a bare host.
    kubeconfig: Path | None = None
    kube_context: str | None = None
    kube_host: str | None = Field(
        default=None, description="API server URL without credentials (local tests and demos)."
    )

    # Pace.
    min_interval: timedelta = Field(default=timedelta(seconds=5), ge=timedelta(0))
    snapshot_interval: timedelta = Field(default=timedelta(minutes=5), gt=timedelta(0))

    # Spool for reports the hub has not taken yet.
    spool_dir: Path = Path("/var/lib/fleetmark-agent/spool")
    spool_max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)

    # Leader election among the pods of the DaemonSet.
    leader_election: bool = True
    lease_name: str = Field(default="fleetmark-agent", min_length=1, max_length=253)
    lease_namespace: str | None = Field(
        default=None, description="Default: the pod's own namespace."
    )
    lease_duration: timedelta = Field(default=timedelta(seconds=15), gt=timedelta(0))
    renew_deadline: timedelta = Field(default=timedelta(seconds=10), gt=timedelta(0))
    retry_period: timedelta = Field(default=timedelta(seconds=2), gt=timedelta(0))

    # Probes and logs.
    health_host: str = "0.0.0.0"  # noqa: S104 - the kubelet probes the pod's own address
    health_port: int = Field(default=8081, ge=0, le=65535)
    log_format: Literal["console", "json"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    _split_lists = field_validator("namespaces", "kinds", mode="before")(_split)
    _split_labels = field_validator("labels", mode="before")(_pairs)
    _durations = field_validator(
        "hub_timeout",
        "state_file_max_age",
        "min_interval",
        "snapshot_interval",
        "lease_duration",
        "renew_deadline",
        "retry_period",
        mode="before",
    )(_seconds)

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, kinds: list[str]) -> list[str]:
        known = {name.lower() for kind in WATCHED_KINDS for name in (kind.kind, kind.plural)}
        unknown = [kind for kind in kinds if kind.lower() not in known]
        if unknown:
            choices = ", ".join(kind.kind for kind in WATCHED_KINDS)
            raise ValueError(f"unknown kind(s) {', '.join(unknown)}; choose from {choices}")
        return kinds

    @field_validator("root_object")
    @classmethod
    def _root_reference(cls, value: str) -> str:
        parts = value.split("/")
        if len(parts) != 3 or not all(parts):
            raise ValueError("expected Kind/namespace/name, e.g. " + DEFAULT_ROOT_OBJECT)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "AgentSettings":
        # The identity is checked here, at start-up, rather than in the first report.
        ClusterIdentity(
            name=self.cluster_name,
            environment=self.environment,
            cluster_type=self.cluster_type,
            labels=self.labels,
        )
        if self.renew_deadline >= self.lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        if self.retry_period >= self.renew_deadline:
            raise ValueError("retry_period must be shorter than renew_deadline")
        if self.leader_election and self.hub_timeout >= self.renew_deadline:
            # The leader sends only while its Lease will outlast the request.
            raise ValueError(
                "hub_timeout must be shorter than renew_deadline: a report is sent only "
                "while the lease is sure to be held until its request times out"
            )
        return self

    @property
    def watched_kinds(self) -> tuple[WatchedKind, ...]:
        wanted = {kind.lower() for kind in self.kinds}
        return tuple(
            kind
            for kind in WATCHED_KINDS
            if kind.kind.lower() in wanted or kind.plural.lower() in wanted
        )

    @property
    def root(self) -> tuple[str, str, str]:
        kind, namespace, name = self.root_object.split("/")
        return kind, namespace, name

    def effective_lease_namespace(self) -> str:
        if self.lease_namespace:
            return self.lease_namespace
        try:
            return POD_NAMESPACE_FILE.read_text().strip() or "default"
        except OSError:
            return "default"

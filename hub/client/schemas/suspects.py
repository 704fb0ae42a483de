"""Suspects (GET /api/v1/suspects), halts and what to roll back to (GET /api/v1/recommendations,
POST /api/v1/halts/{id}/clear): the questions, which the hub's router takes as query models,
and the answers."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from hub.client.params import Text, Timestamp
from hub.client.schemas.base import Answer, Listing
from hub.client.text import Duration

Kind = Literal["platform_commit", "workload_version"]


class SuspectsQuery(BaseModel):
    """GET /api/v1/suspects: the commits and versions applied in an environment in a period,
    ranked by how much more often clusters regressed after them than clusters that had not."""

    environment: Annotated[Text, Field(description="The environment the changes were applied in.")]
    workload: Annotated[
        Text | None,
        Field(
            description="Only this workload's versions; absent: platform commits and every "
            "workload's versions."
        ),
    ] = None
    since: Annotated[
        Timestamp | None, Field(description="Inclusive; default: 2 hours before until.")
    ] = None
    until: Annotated[Timestamp | None, Field(description="Exclusive; default: now.")] = None
    window: Annotated[
        Duration | None,
        Field(
            description="How soon after applying a change a cluster turning not Ready counts "
            "(10m, PT15M, 900); default: FLEETMARK_SUSPECT_WINDOW."
        ),
    ] = None
    min_regressions: Annotated[
        int | None,
        Field(
            ge=1,
            le=1_000_000,
            description="Exposed regressions a suspect needs at least; default: "
            "FLEETMARK_SUSPECT_MIN_REGRESSIONS.",
        ),
    ] = None


class SuspectVerdict(StrEnum):
    SUSPECT = "suspect"
    INCONCLUSIVE = "inconclusive"
    NOT_SUSPECT = "not_suspect"


class SuspectsVerdict(StrEnum):
    SUSPECTS = "suspects"
    INCONCLUSIVE = "inconclusive"
    NONE = "none"


class SuspectCounts(BaseModel):
    exposed: int = Field(description="Clusters that applied the change in the period.")
    exposed_regressed: int = Field(description="Of those, the clusters that regressed after it.")
    control: int = Field(description="The scope's clusters that did not apply it.")
    control_regressed: int = Field(description="Of those, the clusters that regressed in its span.")


class SuspectReason(BaseModel):
    reason: str = Field(description="The reconciler's reason for not being Ready.")
    clusters: int


class SuspectCluster(BaseModel):
    cluster: str
    applied_at: datetime
    regressed_at: datetime
    reason: str | None


class Suspect(BaseModel):
    environment: str
    kind: Kind
    workload: str | None = Field(description="null: a platform commit.")
    revision: str = Field(description="The platform commit's sha, or the version.")
    description: str = Field(description="The change in words.")
    verdict: SuspectVerdict
    score: float = Field(description="Relative risk with +1 smoothing (docs/suspects.md).")
    p_value: float = Field(description="Fisher's exact test, one-sided.")
    explanation: str
    counts: SuspectCounts
    reasons: list[SuspectReason] = Field(description="The commonest reasons, most given first.")
    clusters: list[SuspectCluster] = Field(description="The exposed clusters that regressed.")
    first_applied_at: datetime
    last_applied_at: datetime


class SuspectsAnswer(Listing):
    """Every change applied in the period, suspects first (`to_dataframe()`)."""

    environment: str
    since: datetime
    until: datetime
    window_seconds: float
    min_regressions: int
    verdict: SuspectsVerdict = Field(
        description="suspects when one change is; else inconclusive when one is; else none."
    )
    items: list[Suspect]


class ClearHalt(BaseModel):
    """POST /api/v1/halts/{id}/clear: who ends the halt, and why."""

    by: Annotated[Text, Field(description="Who clears it.")]
    reason: Annotated[Text, Field(description="Why it may be promoted after all.")]


class Halt(BaseModel):
    id: int
    environment: str
    kind: Kind
    workload: str | None
    revision: str
    description: str
    reason: str = Field(description="What the gate answers while the halt holds.")
    started_at: datetime
    ended_at: datetime | None
    ended_how: Literal["superseded", "cleared"] | None
    superseded_by: str | None = Field(description="The newer commit or version applied.")
    cleared_by: str | None
    clear_reason: str | None
    evidence: Suspect = Field(description="The suspect as it stood when the halt began.")


class KnownGood(BaseModel):
    environment: str
    kind: Kind
    workload: str | None
    revision: str = Field(description="The platform commit's sha, or the version.")
    commit_sha: str
    converged_at: datetime = Field(description="When every expected cluster ran it Ready.")


class Recommendations(Answer):
    """The halts that hold and, per environment (and workload), the newest commit or version
    that converged and soaked: where a person or an engine may roll back to."""

    halts: list[Halt]
    known_good: list[KnownGood]

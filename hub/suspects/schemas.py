"""The suspects' and halts' events: what subscribers are told when a change turns suspect and
when its promotion halts or may go on."""

from typing import Literal

from pydantic import BaseModel, Field

from hub.client.schemas.suspects import Suspect


class SuspectEventData(BaseModel):
    """`data` of fleetmark.suspect.found: a change applied in a halting environment is a suspect
    (or inconclusive: clusters regressed after it, and around it too). Once per change."""

    suspect: Suspect
    evidence_url: str = Field(description="The hub's suspects answer for the environment.")


class HaltEventData(BaseModel):
    """`data` of fleetmark.rollout.halted and .unhalted: a clear suspect's promotion out of
    its environment halts, or may go on (superseded by a newer change, or cleared)."""

    environment: str
    workload: str | None = Field(description="null: a platform commit.")
    revision: str = Field(description="The platform commit's sha, or the version.")
    halt_id: int
    reason: str = Field(description="What the gate answers while the halt holds.")
    ended_how: Literal["superseded", "cleared"] | None = Field(
        description="null: the halt begins (fleetmark.rollout.halted)."
    )
    superseded_by: str | None
    cleared_by: str | None
    clear_reason: str | None
    evidence: Suspect
    evidence_url: str = Field(description="The hub's suspects answer for the environment.")


SUSPECT_EVENTS: dict[str, type[BaseModel]] = {
    "fleetmark.suspect.found": SuspectEventData,
    "fleetmark.rollout.halted": HaltEventData,
    "fleetmark.rollout.unhalted": HaltEventData,
}

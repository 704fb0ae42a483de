"""ORM classes and tables of the store; Alembic owns the schema (`migrations/`)."""

from hub.models.auth import ApiToken, PageSignIn
from hub.models.base import Base
from hub.models.desired import Assignment, AssignmentRevision, HarvestError, ManifestRevision
from hub.models.dora import DoraRefresh, DoraRollup
from hub.models.drift import (
    ClusterDrift,
    ClusterDriftReasons,
    DriftEvaluation,
    DriftPeriod,
    DriftTotal,
    ObjectDrift,
)
from hub.models.envdiff import EnvironmentDiffCell, EnvironmentDiffConfig
from hub.models.events import EventDelivery, EventState, EventSubscription, OutboxEvent
from hub.models.fleet import (
    Cluster,
    ClusterType,
    DeploymentTarget,
    Environment,
    Workload,
    Workspace,
)
from hub.models.gate import GateAnswer
from hub.models.git import BranchCommit, GitBranch, GitCommit, Repository
from hub.models.halt import RolloutHalt
from hub.models.jobs import JobRun
from hub.models.observed import (
    AgentSession,
    ClusterHeartbeat,
    ClusterObjectCount,
    DeployedRefresh,
    ObjectState,
    SnapshotPart,
    deployed_cluster,
    deployed_part,
    status_transition,
)
from hub.models.rollout import Rollout
from hub.models.scheduling import ScheduledAssignment, SchedulingError, SchedulingTarget
from hub.models.statuses import CommitStatus

__all__ = [
    "AgentSession",
    "ApiToken",
    "Assignment",
    "AssignmentRevision",
    "Base",
    "BranchCommit",
    "Cluster",
    "ClusterDrift",
    "ClusterDriftReasons",
    "ClusterHeartbeat",
    "ClusterObjectCount",
    "ClusterType",
    "CommitStatus",
    "DeployedRefresh",
    "DeploymentTarget",
    "DoraRefresh",
    "DoraRollup",
    "DriftEvaluation",
    "DriftPeriod",
    "DriftTotal",
    "Environment",
    "EnvironmentDiffCell",
    "EnvironmentDiffConfig",
    "EventDelivery",
    "EventState",
    "EventSubscription",
    "GateAnswer",
    "GitBranch",
    "GitCommit",
    "HarvestError",
    "JobRun",
    "ManifestRevision",
    "ObjectDrift",
    "ObjectState",
    "OutboxEvent",
    "PageSignIn",
    "Repository",
    "Rollout",
    "RolloutHalt",
    "ScheduledAssignment",
    "SchedulingError",
    "SchedulingTarget",
    "SnapshotPart",
    "Workload",
    "Workspace",
    "deployed_cluster",
    "deployed_part",
    "status_transition",
]

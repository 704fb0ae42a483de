"""Apply an agent report: check identity, flatten records, hand them to one SQL statement."""

import json
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from hub.clusters import repository as clusters
from hub.clusters.repository import ClusterIdentity
from hub.errors import ClusterMismatch
from hub.fleet.repository import ensure_cluster_type, ensure_environment
from hub.ingest import repository
from hub.ingest.schemas import ObjectRecord, Report, ReportReply
from hub.revisions import parse_revision


def _row(record: ObjectRecord) -> dict[str, object]:
    applied = parse_revision(record.applied_revision)
    attempted = parse_revision(record.attempted_revision)
    source = record.source
    return {
        "reconciler": record.reconciler,
        "kind": record.kind,
        "namespace": record.namespace,
        "name": record.name,
        "source_url": source.url if source else None,
        "source_ref": source.ref if source else None,
        "source_path": source.path if source else None,
        "applied_revision": record.applied_revision,
        "applied_sha": applied.sha,
        "applied_version": applied.version or applied.digest,
        "attempted_revision": record.attempted_revision,
        "attempted_sha": attempted.sha,
        "ready": record.ready,
        "reason": record.reason,
        "message": record.message,
        "health": record.health,
        "drifted": record.drifted,
        "suspended": record.suspended,
        "last_transition_at": (
            record.last_transition_at.isoformat() if record.last_transition_at else None
        ),
    }


async def _place_cluster(
    session: AsyncSession, cluster: ClusterIdentity, report: Report
) -> list[str]:
    """Adopt the environment and cluster type the agent names when registration left them open.

    A registration that names them wins; a disagreeing agent gets a warning back.
    """
    claimed = report.cluster
    warnings = []
    if cluster.environment is None and claimed.environment is not None:
        environment_id = await ensure_environment(session, claimed.environment)
        cluster_type_id = None
        if claimed.cluster_type is not None:
            cluster_type_id = await ensure_cluster_type(
                session, environment_id, claimed.cluster_type
            )
        await clusters.set_placement(session, cluster.id, environment_id, cluster_type_id)
    elif claimed.environment not in (None, cluster.environment):
        warnings.append(
            f"cluster.environment {claimed.environment!r} ignored: "
            f"the cluster is registered in {cluster.environment!r}"
        )
    elif (
        cluster.environment is not None
        and cluster.cluster_type is None
        and claimed.cluster_type is not None
    ):
        environment_id = await ensure_environment(session, cluster.environment)
        cluster_type_id = await ensure_cluster_type(session, environment_id, claimed.cluster_type)
        await clusters.set_placement(session, cluster.id, environment_id, cluster_type_id)
    if claimed.cluster_type not in (None, cluster.cluster_type) and cluster.cluster_type:
        warnings.append(
            f"cluster.cluster_type {claimed.cluster_type!r} ignored: "
            f"the cluster is registered as {cluster.cluster_type!r}"
        )
    return warnings


async def ingest(
    session: AsyncSession, cluster: ClusterIdentity, report: Report, *, received_at: datetime
) -> ReportReply:
    if report.cluster.name != cluster.name:
        raise ClusterMismatch(
            f"this token belongs to cluster {cluster.name!r}; "
            f"it cannot report for {report.cluster.name!r}"
        )
    # An agent clock running ahead must not pin state in the future.
    observed_at = min(report.observed_at, received_at)
    applied = await repository.apply_report(
        session,
        cluster_id=cluster.id,
        boot_id=report.agent.boot_id,
        agent_version=report.agent.version,
        instance=report.agent.instance,
        sequence=report.sequence,
        observed_at=observed_at,
        received_at=received_at,
        full_snapshot=report.full_snapshot,
        objects_json=json.dumps([_row(record) for record in report.objects]),
        object_count=len(report.objects),
    )
    if not applied.fresh:
        return ReportReply(accepted=0, changed=0, duplicate=True)
    warnings = await _place_cluster(session, cluster, report)
    return ReportReply(
        accepted=applied.accepted, changed=applied.changed, duplicate=False, warnings=warnings
    )

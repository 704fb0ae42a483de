"""Apply an agent report: flatten records, hand them to the ingest statement, read its verdict.

The statement authenticates the token and checks it belongs to the reported cluster before
it writes anything, so a report costs no round trip of its own: it rides in the next batch
of reports the batcher sends.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache

from hub.clusters import repository as clusters
from hub.clusters.repository import ClusterIdentity
from hub.clusters.schemas import DIMENSION_NAME_RULE, is_dimension_name
from hub.database import Statements
from hub.errors import ClusterMismatch, NotAuthenticated
from hub.git.urls import redact_url
from hub.ingest.batcher import ReportBatcher
from hub.ingest.repository import RecordRow, ReportRow, SnapshotPartRow
from hub.ingest.schemas import ObjectRecord, Report, ReportReply
from hub.models.observed import FLUX_SOURCE_KINDS
from hub.revisions import UNKNOWN_FORM, Revision, parse_revision
from hub.security import hash_token

# A fleet reports the same few revisions over and over; parsing is pure, so remember it.
_parse_revision = lru_cache(maxsize=8192)(parse_revision)


def _revision(revision: str | None) -> Revision:
    return _parse_revision(revision) if revision else Revision()


@lru_cache(maxsize=4096)
def _followed(
    reconciler: str, kind: str, url: str | None, ref: str | None, url_ref: str | None
) -> tuple[str | None, str | None]:
    """A record's source URL as stored, without credentials (`_url_warnings` says so), and the
    ref of the source URL whose revisions the object applies, by which the gate and drift find
    what follows a branch. That is the one the record links (the ref of the Flux source object
    it names), else its own ref; none for a Flux source object, which applies nothing. Cached:
    a fleet reports the same few sources over and over."""
    if reconciler == "flux" and kind in FLUX_SOURCE_KINDS:
        url_ref = None
    elif url_ref is None:
        url_ref = ref
    return None if url is None else redact_url(url), url_ref


def _row(record: ObjectRecord) -> RecordRow:
    source = record.source
    if source is None:
        source_url = source_ref = source_path = url_ref = None
    else:
        source_url, url_ref = _followed(
            record.reconciler, record.kind, source.url, source.ref, source.url_ref
        )
        source_ref, source_path = source.ref, source.path
    applied = _revision(record.applied_revision)
    # In RecordRow's order, by position: naming 20 arguments costs a third of the call.
    return RecordRow(
        record.reconciler,
        record.kind,
        record.namespace,
        record.name,
        source_url,
        source_ref,
        source_path,
        url_ref,
        record.applied_revision,
        applied.sha,
        # No version for a revision of no known form: what it names is unknown.
        (applied.version if applied.known else None) or applied.digest,
        record.attempted_revision,
        _revision(record.attempted_revision).sha,
        record.ready,
        record.reason,
        record.message,
        record.health,
        record.drifted,
        record.suspended,
        record.last_transition_at,
    )


# Same words as hub.clusters.service.authenticate: the ingest path authenticates in its own
# statement, and an agent must see the same refusal either way.
_NO_CREDENTIALS = "a cluster token is required (Authorization: Bearer <token>)"
_UNKNOWN_CREDENTIALS = "the cluster token is unknown or revoked"


async def authenticate(statements: Statements, token: str | None, *, token_secret: str) -> None:
    """Refuse a missing or unknown token (ingest checks tokens in its statement otherwise)."""
    if not token:
        raise NotAuthenticated(_NO_CREDENTIALS)
    if await clusters.identify_token_hash(statements, hash_token(token_secret, token)) is None:
        raise NotAuthenticated(_UNKNOWN_CREDENTIALS)


# Records named by unknown-form warnings in one reply; the rest are counted.
_NAMED_RECORDS = 20
# Characters of a claimed name a warning repeats.
_SHOWN_CLAIM = 63


def _revision_warnings(report: Report) -> list[str]:
    """A warning per revision of no known form: it is accepted and kept, but judged
    `unknown_revision` by the gate and drift, which say why."""
    warnings = []
    for record in report.objects:
        for field in ("applied_revision", "attempted_revision"):
            text = getattr(record, field)
            if text and not _revision(text).known:
                warnings.append(
                    f"{record.reconciler} {record.kind} {record.namespace}/{record.name}: "
                    f"{field} {text!r} {UNKNOWN_FORM}; it is judged unknown_revision"
                )
    if len(warnings) > _NAMED_RECORDS:
        more = len(warnings) - _NAMED_RECORDS
        warnings = [*warnings[:_NAMED_RECORDS], f"and {more} more revisions of no known form"]
    return warnings


def _url_warnings(report: Report, rows: Sequence[RecordRow]) -> list[str]:
    """One warning for the records whose source URL held credentials, dropped before storing:
    those whose `rows` store another URL than they reported."""
    named = [
        (record, row.source_url)
        for record, row in zip(report.objects, rows, strict=True)
        if record.source is not None and record.source.url != row.source_url
    ]
    if not named:
        return []
    (record, stored), more = named[0], len(named) - 1
    others = f" (and {more} more object{'s' if more > 1 else ''})" if more else ""
    return [
        f"{record.reconciler} {record.kind} {record.namespace}/{record.name}{others}: "
        f"source.url held credentials (a user name or password), dropped: stored as {stored}"
    ]


_PLACE = "an admin places it (fleetmark clusters place)"


def _placement_text(environment: str | None, cluster_type: str | None) -> str:
    if cluster_type is None:
        return str(environment)
    return f"{environment or '-'}/{cluster_type}"


def _valid_claims(report: Report) -> tuple[str | None, str | None, list[str]]:
    """The claimed environment and cluster type that are names registration takes (others
    are ignored, with a warning naming the field)."""
    claims: list[str | None] = []
    warnings = []
    for field, claimed in (
        ("environment", report.cluster.environment),
        ("cluster_type", report.cluster.cluster_type),
    ):
        if claimed is None or is_dimension_name(claimed):
            claims.append(claimed)
            continue
        shown = claimed if len(claimed) <= _SHOWN_CLAIM else claimed[:_SHOWN_CLAIM] + "…"
        warnings.append(
            f"cluster.{field} {shown!r} ignored: not a name registration takes "
            f"({DIMENSION_NAME_RULE})"
        )
        claims.append(None)
    return claims[0], claims[1], warnings


def _placement_warning(
    cluster: ClusterIdentity,
    environment: str | None,
    cluster_type: str | None,
    *,
    agent_placement: bool,
) -> list[str]:
    """What the agent claimed (valid names) that its placement, after this report, is not.

    Placement is the operator's; where first reports may place (`agent_placement`), only into
    a declared environment and cluster type, and never elsewhere later."""
    disagrees = (environment is not None and environment != cluster.environment) or (
        cluster_type is not None and cluster_type != cluster.cluster_type
    )
    if not disagrees:
        return []
    claimed = f"claimed {_placement_text(environment, cluster_type)} ignored"
    if cluster.environment is None:
        if agent_placement:
            return [
                f"{claimed}: a claim places a cluster only into a declared environment "
                f"(the repositories file's environments or the control plane); {_PLACE}"
            ]
        return [f"{claimed}: the cluster is not placed; {_PLACE}"]
    placed = _placement_text(cluster.environment, cluster.cluster_type)
    if cluster.cluster_type is None and agent_placement:
        return [
            f"{claimed}: the cluster is placed in {placed}, and a claim names only a cluster "
            f"type the control plane declares there; {_PLACE}"
        ]
    return [f"{claimed}: the cluster is placed in {placed}; {_PLACE}"]


async def ingest(
    batcher: ReportBatcher,
    token: str | None,
    report: Report,
    *,
    received_at: datetime,
    max_clock_skew: timedelta,
    max_backdate: timedelta,
    token_secret: str,
    agent_placement: bool,
) -> ReportReply:
    """Authenticate, check the token is this cluster's, and apply the report, in one statement.

    With `agent_placement` (FLEETMARK_AGENT_PLACEMENT=first-report) a claim may place a cluster
    left open. A report that waits too long for the store gets PoolTimeout (503).
    """
    if not token:
        raise NotAuthenticated(_NO_CREDENTIALS)
    # An agent clock running ahead (within the skew the schema allows) must not pin state in
    # the future: the time is the hub's, so the next report is newer.
    observed_at = min(report.observed_at, received_at)
    part = report.snapshot_part
    environment, cluster_type, claim_warnings = _valid_claims(report)
    records = [_row(record) for record in report.objects]
    applied = await batcher.apply(
        ReportRow(
            token_hash=hash_token(token_secret, token),
            cluster_name=report.cluster.name,
            boot_id=report.agent.boot_id,
            agent_version=report.agent.version,
            instance=report.agent.instance,
            sequence=report.sequence,
            observed_at=observed_at,
            received_at=received_at,
            not_after=received_at + max_clock_skew,
            not_before=observed_at - max_backdate,
            full_snapshot=report.full_snapshot,
            claimed_environment=environment,
            claimed_cluster_type=cluster_type,
            agent_placement=agent_placement,
            records=records,
            skipped_kinds=[skipped.model_dump() for skipped in report.skipped_kinds],
        ),
        None
        if part is None
        else SnapshotPartRow(snapshot_id=part.id, part_index=part.index, part_count=part.count),
    )
    cluster = applied.cluster
    if cluster is None:
        raise NotAuthenticated(_UNKNOWN_CREDENTIALS)
    if report.cluster.name != cluster.name:
        # The statement wrote nothing: it applies a report only for the token's own cluster.
        raise ClusterMismatch(
            f"this token belongs to cluster {cluster.name!r}; "
            f"it cannot report for {report.cluster.name!r}"
        )
    if not applied.fresh:
        return ReportReply(accepted=0, changed=0, duplicate=True)
    return ReportReply(
        accepted=len(report.objects),
        changed=applied.changed,
        duplicate=False,
        warnings=[
            *claim_warnings,
            *_placement_warning(
                cluster, environment, cluster_type, agent_placement=agent_placement
            ),
            *_revision_warnings(report),
            *_url_warnings(report, records),
        ],
    )

"""GitOps repositories: their harvest status (read scope) and their configuration (admin)."""

from fastapi import APIRouter, status

from hub.client.params import Id
from hub.deps import AdminAccess, ClockDep, ReadAccess, ReadSessionDep, SessionDep, SettingsDep
from hub.errors import error_response, error_responses
from hub.harvest import service
from hub.harvest.schemas import RepositoryConfig, RepositoryStatus

router = APIRouter(
    prefix="/api/v1/repositories",
    tags=["repositories"],
    responses=error_responses(401, 403, 503),
)


@router.get("", response_model=list[RepositoryStatus], dependencies=[ReadAccess])
async def list_repositories(session: ReadSessionDep, clock: ClockDep) -> list[RepositoryStatus]:
    """Each repository with its last harvested commit per branch, lag and recent errors."""
    return await service.list_repositories(session, now=clock())


@router.post(
    "",
    response_model=RepositoryStatus,
    status_code=status.HTTP_201_CREATED,
    dependencies=[AdminAccess],
    responses=error_responses(400, 422)
    | error_response(
        409, "Configured already, through the API or (to be changed there) the repositories file."
    ),
)
async def add_repository(
    config: RepositoryConfig, session: SessionDep, settings: SettingsDep, clock: ClockDep
) -> RepositoryStatus:
    """Harvest a repository from the next run on (the repositories file takes precedence)."""
    return await service.add_repository(
        session,
        config,
        credentials_dir=settings.git_credentials_dir,
        allow_local=settings.local_repositories_allowed,
        now=clock(),
    )


@router.delete(
    "/{repository_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[AdminAccess],
    responses=error_responses(422)
    | error_response(404, "No repository with that id.")
    | error_response(409, "Configured in the repositories file: remove it there."),
)
async def remove_repository(repository_id: Id, session: SessionDep) -> None:
    """Stop harvesting a repository added through the API; what was harvested stays."""
    await service.remove_repository(session, repository_id)

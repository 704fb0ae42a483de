"""GitOps repositories: their harvest status (read scope) and their configuration (admin)."""

from fastapi import APIRouter, status

from hub.deps import AdminAccess, ClockDep, ReadAccess, ReadSessionDep, SessionDep, SettingsDep
from hub.harvest import service
from hub.harvest.schemas import RepositoryConfig, RepositoryStatus

router = APIRouter(prefix="/api/v1/repositories", tags=["repositories"])


@router.get("", response_model=list[RepositoryStatus], dependencies=[ReadAccess])
async def list_repositories(session: ReadSessionDep, clock: ClockDep) -> list[RepositoryStatus]:
    """Each repository with its last harvested commit per branch, lag and recent errors."""
    return await service.list_repositories(session, now=clock())


@router.post(
    "",
    response_model=RepositoryStatus,
    status_code=status.HTTP_201_CREATED,
    dependencies=[AdminAccess],
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
    "/{repository_id}", status_code=status.HTTP_204_NO_CONTENT, dependencies=[AdminAccess]
)
async def remove_repository(repository_id: int, session: SessionDep) -> None:
    """Stop harvesting a repository added through the API; what was harvested stays."""
    await service.remove_repository(session, repository_id)

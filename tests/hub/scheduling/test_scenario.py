"""The reference scenario end to end through the hub: control plane in real git, one commit per
change in the platform GitOps repository, and the story's steps as commits to the control plane."""

from pathlib import Path
from typing import Any

import yaml

from tests.hub.scheduling.conftest import Schedule
from tests.hub.scheduling.fleet import ControlPlane, Platform
from tests.scheduler_core import scenario

FUNCTIONAL = "hello-world-app-functional-test"
PERFORMANCE = "hello-world-app-performance-test"
UAT = "hello-world-app-uat-test"
FILES = ("namespace.yaml", "platform-config.yaml", "reconciler.yaml")
PROMOTED = ".github/tracking/Promoted_Commit_Id"


def folder(cluster_type: str, target: str) -> list[str]:
    return [f"{cluster_type}/{target}/{name}" for name in FILES]


def documents(text: str) -> list[Any]:
    return list(yaml.safe_load_all(text))


def one(text: str) -> Any:
    (document,) = documents(text)
    return document


async def test_dev_is_written_as_one_commit_in_kalypsos_layout(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    outcome = await schedule("dev")

    assert outcome.failure is None
    assert outcome.errors == []
    assert platform.commits("dev") == [outcome.commit]
    assert outcome.branch == "dev"
    files = platform.files("dev")
    assert sorted(files) == [
        PROMOTED,
        "command-center/README.md",
        "drone/README.md",
        *folder("drone", FUNCTIONAL),
        "large/README.md",
        *folder("large", PERFORMANCE),
        "small/README.md",
    ]
    assert files[PROMOTED] == control_plane.main
    assert outcome.promoted_commit == control_plane.main
    assert outcome.promoted_changed
    assert [(c.cluster_type, c.deployment_target, c.change) for c in outcome.changes] == [
        ("drone", FUNCTIONAL, "added"),
        ("large", PERFORMANCE, "added"),
    ]
    assert "Nothing is assigned to this cluster type." in files["small/README.md"]
    author = platform.git("log", "-1", "--format=%an <%ae>", "dev")
    assert author == "fleetmark scheduler <scheduler@fleetmark.invalid>"


async def test_namespaces_configs_and_reconcilers_per_cluster_type(
    schedule: Schedule, platform: Platform
) -> None:
    await schedule("dev")
    files = platform.files("dev")

    drone_namespace = one(files[f"drone/{FUNCTIONAL}/namespace.yaml"])
    large_namespace = one(files[f"large/{PERFORMANCE}/namespace.yaml"])
    assert drone_namespace["metadata"]["name"] == "dev-drone-hello-world-app-functional-test"
    assert large_namespace["metadata"]["name"] == "dev-large-hello-world-app-performance-test"
    assert drone_namespace["metadata"]["labels"] == {
        "environment": "dev",
        "workspace": "kaizen-app-team",
        "workload": "hello-world-app",
        "deploymentTarget": FUNCTIONAL,
    }

    drone_config = one(files[f"drone/{FUNCTIONAL}/platform-config.yaml"])
    assert drone_config["metadata"]["namespace"] == "dev-drone-hello-world-app-functional-test"
    assert drone_config["data"] == {
        "ENVIRONMENT": "Dev",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
        "CLUSTER_NAME": "Drone",
        "REGION": "East US",
        "DATABASE_URL": "mysql://restricted-host:3306/mysqlrty123",
    }
    assert one(files[f"large/{PERFORMANCE}/platform-config.yaml"])["data"] == {
        "ENVIRONMENT": "Dev",
        "SOME_COMMON_ENVIRONMENT_VARIABLE": "false",
        "REGION": "West US",
        "DATABASE_URL": "mysql://west-host:8806/mysql",
    }

    # drone uses the arc-flux template: a GitRepository and a Kustomization of the same name.
    source, kustomization = documents(files[f"drone/{FUNCTIONAL}/reconciler.yaml"])
    assert (source["kind"], kustomization["kind"]) == ("GitRepository", "Kustomization")
    assert source["metadata"] == {"name": FUNCTIONAL, "namespace": "flux-system"}
    assert source["spec"]["url"] == scenario.APP_GITOPS
    assert source["spec"]["ref"] == {"branch": "dev"}
    assert kustomization["spec"]["targetNamespace"] == "dev-drone-hello-world-app-functional-test"
    assert kustomization["spec"]["sourceRef"] == {"kind": "GitRepository", "name": FUNCTIONAL}
    assert kustomization["spec"]["path"] == "./functional-test"
    assert kustomization["spec"]["prune"] is True

    # large uses the argocd template: one Application.
    application = one(files[f"large/{PERFORMANCE}/reconciler.yaml"])
    assert application["kind"] == "Application"
    assert application["metadata"] == {"name": PERFORMANCE, "namespace": "argocd"}
    assert application["spec"]["destination"]["namespace"] == (
        "dev-large-hello-world-app-performance-test"
    )
    assert application["spec"]["source"] == {
        "repoURL": scenario.APP_GITOPS,
        "targetRevision": "dev",
        "path": "./performance-test",
    }


async def test_nothing_is_committed_when_nothing_changed(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    first = await schedule("dev")
    # A control-plane commit that changes no input of dev.
    control_plane.commit("dev", {"README.md": "# dev\n"})

    again = await schedule("dev")

    assert again.commit is None
    assert again.failure is None
    assert platform.commits("dev") == [first.commit]
    assert again.parent == first.commit
    assert (again.written, again.deleted, again.changes) == ([], [], [])
    assert again.render == "incremental"


async def test_stage_policy_assigns_uat_test_to_every_stage_cluster_type(
    schedule: Schedule, platform: Platform
) -> None:
    outcome = await schedule("stage")

    files = platform.files("stage")
    assert outcome.errors == []
    assert [(c.cluster_type, c.deployment_target) for c in outcome.changes] == [
        ("drone", UAT),
        ("large", UAT),
    ]
    assert sorted(files) == [
        PROMOTED,
        "drone/README.md",
        *folder("drone", UAT),
        "large/README.md",
        *folder("large", UAT),
    ]
    assert one(files[f"drone/{UAT}/namespace.yaml"])["metadata"]["name"] == (
        "stage-drone-hello-world-app-uat-test"
    )
    assert one(files[f"drone/{UAT}/platform-config.yaml"])["data"] == {"ENVIRONMENT": "Stage"}
    assert one(files[f"large/{UAT}/platform-config.yaml"])["data"] == {
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
    }
    # On stage, large reconciles with Flux.
    kinds = [document["kind"] for document in documents(files[f"large/{UAT}/reconciler.yaml"])]
    assert kinds == ["GitRepository", "Kustomization"]
    assert platform.branches().keys() == {"stage"}


async def test_west_us_config_change_on_stage_touches_only_west_us_assignments(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    first = await schedule("stage")
    west_us = scenario.config_map(
        "west-us-config",
        scenario.WEST_US,
        {"REGION": "West US", "DATABASE_URL": "mysql://west-stage-host:8806/mysql"},
    )
    control_plane.commit("stage", {"cluster-types/west-us/west-us-config.yaml": west_us})

    outcome = await schedule("stage")

    assert outcome.commit is not None
    assert platform.commits("stage") == [outcome.commit, first.commit]
    assert platform.changed(first.commit or "", outcome.commit) == [
        f"large/{UAT}/platform-config.yaml"
    ]
    assert [(c.cluster_type, c.change) for c in outcome.changes] == [("large", "updated")]
    assert outcome.render == "incremental"
    assert not outcome.promoted_changed
    config = one(platform.files("stage")[f"large/{UAT}/platform-config.yaml"])
    assert config["data"]["DATABASE_URL"] == "mysql://west-stage-host:8806/mysql"


async def test_cluster_type_small_added_to_stage_gets_uat_test_and_nothing_else_changes(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    first = await schedule("stage")
    small = scenario.cluster_type("small", "arc-flux", region="west-us", size="small")
    control_plane.commit("stage", {"cluster-types/west-us/small/small-cluster-type.yaml": small})

    outcome = await schedule("stage")

    assert outcome.commit is not None
    assert platform.changed(first.commit or "", outcome.commit) == [
        "small/README.md",
        *folder("small", UAT),
    ]
    files = platform.files("stage")
    assert one(files[f"small/{UAT}/namespace.yaml"])["metadata"]["name"] == (
        "stage-small-hello-world-app-uat-test"
    )
    assert one(files[f"small/{UAT}/platform-config.yaml"])["data"] == {
        "ENVIRONMENT": "Stage",
        "REGION": "West US",
    }


async def test_promoting_a_new_main_commit_updates_promoted_commit_id(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    first = await schedule("dev")
    labelled = scenario.NAMESPACE_TEMPLATE.replace(
        '          environment: "{{ .Environment }}"\n',
        '          environment: "{{ .Environment }}"\n          team: platform\n',
    )
    main = control_plane.commit("main", {"templates/namespace.yaml": labelled})

    # dev is pinned to the first main commit: the new template is not dev's yet.
    pinned = await schedule("dev")
    control_plane.promote("dev", main)
    promoted = await schedule("dev")

    assert pinned.commit is None
    assert promoted.commit is not None
    assert promoted.promoted_commit == main
    assert promoted.promoted_changed
    assert platform.changed(first.commit or "", promoted.commit) == [
        PROMOTED,
        f"drone/{FUNCTIONAL}/namespace.yaml",
        f"large/{PERFORMANCE}/namespace.yaml",
    ]
    files = platform.files("dev")
    assert files[PROMOTED] == main
    assert one(files[f"drone/{FUNCTIONAL}/namespace.yaml"])["metadata"]["labels"]["team"] == (
        "platform"
    )
    title = platform.git("log", "-1", "--format=%s", "dev")
    assert title == f"Schedule dev: 2 updated; promote {main[:12]}"


async def test_an_assignment_no_longer_selected_loses_its_folder(
    schedule: Schedule, control_plane: ControlPlane, platform: Platform
) -> None:
    await schedule("dev")
    control_plane.commit("dev", {"scheduling/kaizen/performance-test-policy.yaml": None})

    outcome = await schedule("dev")

    assert [(c.cluster_type, c.change, c.status) for c in outcome.changes] == [
        ("large", "removed", None)
    ]
    assert outcome.deleted == folder("large", PERFORMANCE)
    files = platform.files("dev")
    assert not any(path.startswith(f"large/{PERFORMANCE}/") for path in files)
    assert "Nothing is assigned to this cluster type." in files["large/README.md"]


async def test_hand_edits_in_the_platform_branch_are_rendered_over_in_full(
    schedule: Schedule, platform: Platform, tmp_path: Path
) -> None:
    await schedule("dev")
    config = f"drone/{FUNCTIONAL}/platform-config.yaml"
    edited = platform.push(
        tmp_path / "work",
        "dev",
        {
            config: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: edited}\n",
            "drone/stray.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stray}\n",
            "CODEOWNERS": "* @contoso/platform\n",
        },
    )

    outcome = await schedule("dev")

    assert outcome.render == "full"
    assert outcome.parent == edited
    assert outcome.written == [config]
    assert outcome.deleted == ["drone/stray.yaml"]
    files = platform.files("dev")
    assert one(files[config])["metadata"]["name"] == "platform-config"
    # Files outside the cluster type folders are not the scheduler's.
    assert files["CODEOWNERS"] == "* @contoso/platform\n"

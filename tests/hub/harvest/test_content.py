"""What the harvester reads from files: platform assignment folders and application manifests."""

import pytest

from hub.harvest.documents import ContentError
from hub.harvest.manifests import ManifestFile, summarise
from hub.harvest.platform import (
    AppSource,
    Namespace,
    config_hash,
    parse_config,
    parse_namespace,
    parse_promoted_commit,
    parse_reconciler,
)
from tests.hub.harvest import scenario

APP_URL = "https://github.com/contoso/app-gitops"


def test_flux_reconciler_points_at_the_kustomization_path_of_its_git_repository() -> None:
    text = scenario.flux_reconciler(
        "functional-test", "dev-drone", APP_URL, "dev", "./functional-test"
    )

    reconciler = parse_reconciler(text.encode(), "drone/x/reconciler.yaml")

    assert reconciler.kind == "flux"
    assert reconciler.sources == (AppSource(APP_URL, "dev", "functional-test"),)


def test_argocd_multi_source_application_keeps_the_git_path_source_only() -> None:
    text = scenario.argocd_reconciler(
        "performance-test", "dev-large", APP_URL, "dev", "performance-test", helm_values=True
    )

    reconciler = parse_reconciler(text.encode(), "large/x/reconciler.yaml")

    assert reconciler.kind == "argocd"
    assert reconciler.sources == (AppSource(APP_URL, "dev", "performance-test"),)


def test_argocd_head_revision_means_the_default_branch() -> None:
    text = scenario.argocd_reconciler("uat-test", "ns", APP_URL, "HEAD", ".")

    assert parse_reconciler(text.encode(), "r.yaml").sources == (AppSource(APP_URL, None, ""),)


@pytest.mark.parametrize(
    ("ref", "branch", "pinned"),
    [
        ({"tag": "v1.4.2"}, None, "refs/tags/v1.4.2"),
        ({"semver": ">=1.4.0"}, None, "semver:>=1.4.0"),
        ({"branch": "dev", "commit": "1f2e3d4c5b6a7980"}, "dev", "1f2e3d4c5b6a7980"),
        ({"name": "refs/heads/release"}, "release", None),
        ({"name": "refs/pull/7/head"}, None, "refs/pull/7/head"),
    ],
)
def test_a_flux_source_pinned_to_a_revision_says_so_as_agents_report_it(
    ref: dict[str, str], branch: str | None, pinned: str | None
) -> None:
    text = scenario.flux_reconciler("uat-test", "ns", APP_URL, "stage", "./uat-test").replace(
        "    branch: stage\n", "".join(f"    {key}: '{value}'\n" for key, value in ref.items())
    )

    [source] = parse_reconciler(text.encode(), "r.yaml").sources

    assert (source.branch, source.path, source.pinned) == (branch, "uat-test", pinned)


@pytest.mark.parametrize(
    ("revision", "branch", "pinned"),
    [
        ("stage", "stage", None),
        ("v1.4.2", None, "v1.4.2"),
        ("2.0.0-rc.1", None, "2.0.0-rc.1"),
        ("refs/tags/release-7", None, "refs/tags/release-7"),
        (
            "1F2E3D4C5B6A79801F2E3D4C5B6A79801F2E3D4C",
            None,
            "1F2E3D4C5B6A79801F2E3D4C5B6A79801F2E3D4C",
        ),
    ],
)
def test_an_argocd_target_revision_naming_a_commit_or_version_tag_is_pinned(
    revision: str, branch: str | None, pinned: str | None
) -> None:
    text = scenario.argocd_reconciler("uat-test", "ns", APP_URL, revision, "uat-test")

    assert parse_reconciler(text.encode(), "r.yaml").sources == (
        AppSource(APP_URL, branch, "uat-test", pinned),
    )


def test_other_template_output_is_no_error_and_has_no_source() -> None:
    text = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: custom-reconciler}\n"

    reconciler = parse_reconciler(text, "r.yaml")

    assert (reconciler.kind, reconciler.sources) == (None, ())


def test_namespace_and_config() -> None:
    namespace = scenario.namespace_yaml("dev", "drone", "functional-test")
    config = scenario.config_yaml("ns", {"REGION": "East US", "REPLICAS": "3"})

    assert parse_namespace(namespace.encode(), "n.yaml") == Namespace(
        "dev-drone-hello-world-app-functional-test", workload="hello-world-app"
    )
    assert parse_config(config.encode(), "c.yaml") == {"REGION": "East US", "REPLICAS": "3"}


def test_config_hash_ignores_how_the_config_is_written() -> None:
    compact = b"kind: ConfigMap\ndata: {A: '1', B: two}\n"
    spread = b"# reordered, commented\nkind: ConfigMap\ndata:\n  B: two\n  A: '1'\n"

    assert config_hash(parse_config(compact, "c")) == config_hash(parse_config(spread, "c"))
    assert config_hash({"A": "1"}) != config_hash({"A": "2"})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"kind: Namespace\nmetadata:\n  name: [unclosed\n", "line 4, column 1: invalid YAML"),
        (b"kind: Service\nmetadata: {name: x}\n", "no Namespace document"),
        (b"- just\n- a list\n", "document 1 is a list, expected a mapping"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary file"),
        (b"kind: Namespace\nmetadata: {name: caf\xe9}\n", "not UTF-8 text"),
    ],
)
def test_unusable_namespace_files_name_the_file_and_the_problem(
    content: bytes, problem: str
) -> None:
    with pytest.raises(ContentError) as caught:
        parse_namespace(content, "drone/functional-test/namespace.yaml")

    assert str(caught.value).startswith("drone/functional-test/namespace.yaml: ")
    assert problem in str(caught.value)


def test_promoted_commit_must_be_a_commit_id() -> None:
    sha = scenario.PROMOTED["dev"]

    assert parse_promoted_commit(f"{sha.upper()}\n".encode(), "p") == sha
    with pytest.raises(ContentError, match="expected a commit id"):
        parse_promoted_commit(b"main\n", ".github/tracking/Promoted_Commit_Id")


def files(folder: str, contents: dict[str, str | bytes | None]) -> list[ManifestFile]:
    return [
        ManifestFile(
            path=f"{folder}/{name}",
            blob=f"{index:040x}",
            data=content.encode() if isinstance(content, str) else content,
        )
        for index, (name, content) in enumerate(contents.items())
    ]


def test_version_prefers_descriptor_then_label_then_image_tag() -> None:
    descriptor = scenario.descriptor("functional-test", "dev", "2.0.0-rc.1")
    labelled = scenario.deployment("1.9.0", label=True)
    plain = scenario.deployment("1.8.0")

    both, _ = summarise(files("a", {"d.yaml": labelled, "desc.yaml": descriptor}), "a")
    label, _ = summarise(files("b", {"d.yaml": labelled}), "b")
    image, _ = summarise(files("c", {"d.yaml": plain}), "c")

    assert (both.workload_version, both.version_source) == ("2.0.0-rc.1", "descriptor")
    assert (label.workload_version, label.version_source) == ("1.9.0", "label")
    assert (image.workload_version, image.version_source) == ("1.8.0", "image")


def test_images_apply_kustomize_overrides_and_keep_the_unmatched_ones() -> None:
    kustomization = """\
resources: [deployment.yaml]
images:
- name: ghcr.io/contoso/hello-world
  newTag: 1.1.0
- name: docker.io/envoyproxy/envoy
  newName: mirror.contoso.example/envoy
  digest: sha256:4f2a
- name: redis
  newTag: "7.4"
"""
    state, problems = summarise(
        files(
            "functional-test",
            {"deployment.yaml": scenario.deployment("1.0.0"), "kustomization.yaml": kustomization},
        ),
        "functional-test",
    )

    assert problems == []
    assert state.images == (
        "ghcr.io/contoso/hello-world:1.1.0",
        "ghcr.io/contoso/migrations:7",
        "mirror.contoso.example/envoy@sha256:4f2a",
        "redis:7.4",
    )
    assert (state.workload_version, state.version_source) == ("1.1.0", "image")


def test_digest_follows_content_not_formatting_or_folder() -> None:
    deployment = scenario.deployment("1.0.0")
    reformatted = "# same objects, other layout\n" + deployment.replace(
        "replicas: 2", "replicas:   2"
    )

    first, _ = summarise(files("dev-a", {"deployment.yaml": deployment}), "dev-a")
    same, _ = summarise(files("dev-b", {"deployment.yaml": reformatted}), "dev-b")
    changed, _ = summarise(
        files("dev-a", {"deployment.yaml": scenario.deployment("1.0.1")}), "dev-a"
    )
    renamed, _ = summarise(files("dev-a", {"app.yaml": deployment}), "dev-a")

    assert first.digest.startswith("sha256:")
    assert len(first.digest) == 71
    assert first.digest == same.digest
    assert len({first.digest, changed.digest, renamed.digest}) == 3


def test_bad_yaml_in_a_folder_is_a_problem_and_the_rest_still_counts() -> None:
    state, problems = summarise(
        files(
            "uat-test",
            {
                "deployment.yaml": scenario.deployment("1.2.0"),
                "broken.yaml": "a: [\n",
                "big.bin": None,
            },
        ),
        "uat-test",
    )

    [problem] = problems
    assert problem.path == "uat-test/broken.yaml"
    assert str(problem).startswith("uat-test/broken.yaml: line 2, column 1: invalid YAML")
    assert state.workload_version == "1.2.0"

"""The integration recipes of examples/integrations/ (docs/integrations.md): each is an object
its engine's API server takes as written (its CRD's schema, kept in tests/data/crds/), asks the
decision endpoint a question the hub takes, and, evaluated as the engine evaluates it,
succeeds on a passed gate, fails on a failed one and waits on a pending one. The decision
bodies are the real endpoint's, on a real hub and database; the conditions are found in the
recipes with JSONPath and evaluated by tests/hub/gate/expr_subset.py. The CI recipes run
commands and options the command line has."""

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import typer
import yaml
from jsonpath_ng import parse as jsonpath
from jsonpath_ng.ext import parse as jsonpath_filtered
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from hub.cli import app
from hub.client.operations import GATE_DECISION
from tests.crds import CRDS, crd_validators
from tests.hub.gate.decisions import DECISION, Decisions, pending_passed_failed
from tests.hub.gate.expr_subset import evaluate
from tests.hub.harvest.scenario import WORKLOAD
from tests.hub.simulated_fleet import Fleet
from tests.support import FakeClock, bearer

RECIPES = Path(__file__).parents[3] / "examples" / "integrations"
# The CRD files whose kinds the recipes are, and the schema of the config of Kargo's `http`
# step (its CRDs keep a step's config free-form).
CRD_FILES = (
    "analysis-template-crd.yaml",
    "kargo.akuity.io_stages.yaml",
    "kargo.akuity.io_promotiontasks.yaml",
    "promoter.argoproj.io_webrequestcommitstatuses.yaml",
)
KARGO_HTTP_CONFIG = CRDS / "kargo-http-config.json"
CI_RECIPES = ("github-actions", "gitlab-ci")
VERDICTS = ("passed", "pending", "failed")
# A Kargo or Argo Rollouts template: `${{ vars.x }}`, `{{args.x}}`; not part of a query name.
TEMPLATE = re.compile(r"\$?\{\{.*?\}\}")


def kubernetes_recipes() -> dict[str, dict[str, Any]]:
    return {
        str(path.relative_to(RECIPES)): yaml.safe_load(path.read_text())
        for path in sorted(RECIPES.rglob("*.yaml"))
        if path.parent.name not in CI_RECIPES
    }


def recipe(kind: str) -> dict[str, Any]:
    [found] = [document for document in kubernetes_recipes().values() if document["kind"] == kind]
    return found


def one(path: str, document: Any, *, filtered: bool = False) -> Any:
    """The one value at the JSONPath `path` of `document`."""
    matches = (jsonpath_filtered if filtered else jsonpath)(path).find(document)
    assert len(matches) == 1, (path, [match.value for match in matches])
    return matches[0].value


def asks_the_decision(url: str, parameters: list[str]) -> None:
    """`url` is the decision endpoint under the hub's base URL, asked only what it takes."""
    assert urlsplit(TEMPLATE.sub("https://fleetmark.example.com", url, count=1)).path == (
        GATE_DECISION.path
    )
    assert parameters
    assert set(parameters) <= set(GATE_DECISION.query), parameters


@pytest.fixture
async def decisions(
    fleet: Fleet, client: httpx.AsyncClient, read_token: str, clock: FakeClock
) -> Decisions:
    return await pending_passed_failed(fleet, client, read_token, clock)


# --- every recipe is an object its engine takes -----------------------------------------------


def test_every_kubernetes_recipe_is_valid_against_its_crd() -> None:
    validators = {key: v for name in CRD_FILES for key, v in crd_validators(name).items()}
    recipes = kubernetes_recipes()

    assert {(d["apiVersion"], d["kind"]) for d in recipes.values()} == set(validators)
    for where, document in recipes.items():
        validator = validators[(document["apiVersion"], document["kind"])]
        errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]
        assert errors == [], where


def test_the_kargo_http_step_is_valid_against_its_config_schema() -> None:
    schema = yaml.safe_load(KARGO_HTTP_CONFIG.read_text())
    Draft202012Validator.check_schema(schema)
    config = one("$.spec.steps[?(@.uses == 'http')].config", recipe("PromotionTask"), filtered=True)

    errors = [
        f"{e.json_path}: {e.message}" for e in Draft202012Validator(schema).iter_errors(config)
    ]
    assert errors == []


def test_the_schemas_refuse_what_their_engines_would_not_take() -> None:
    template = recipe("AnalysisTemplate")
    [validator] = crd_validators("analysis-template-crd.yaml").values()
    template["spec"]["metrics"][0]["succesCondition"] = 'result == "passed"'

    assert [e.message for e in validator.iter_errors(template)] == [
        "Additional properties are not allowed ('succesCondition' was unexpected)"
    ]


# --- every recipe asks the decision endpoint what it takes -----------------------------------


def test_the_analysis_template_asks_the_decision_with_its_own_arguments() -> None:
    template = recipe("AnalysisTemplate")
    url = one("$.spec.metrics[0].provider.web.url", template)
    declared = {argument["name"] for argument in template["spec"]["args"]}

    asks_the_decision(url, list(parse_qs(urlsplit(url).query)))
    assert set(re.findall(r"\{\{\s*args\.([\w-]+)\s*\}\}", yaml.safe_dump(template))) == declared


def test_the_kargo_stage_sets_what_the_task_and_the_analysis_template_leave_open() -> None:
    stage, task, template = recipe("Stage"), recipe("PromotionTask"), recipe("AnalysisTemplate")
    step = one("$.spec.promotionTemplate.spec.steps[?(@.task)]", stage, filtered=True)
    open_arguments = {
        argument["name"]
        for argument in template["spec"]["args"]
        if "value" not in argument and "valueFrom" not in argument
    }

    assert step["task"]["name"] == task["metadata"]["name"]
    assert {v["name"] for v in step["vars"]} == {
        v["name"] for v in task["spec"]["vars"] if "value" not in v
    }
    assert (
        one("$.spec.verification.analysisTemplates[0].name", stage)
        == (template["metadata"]["name"])
    )
    assert {a["name"] for a in stage["spec"]["verification"]["args"]} == open_arguments
    config = one("$.spec.steps[?(@.uses == 'http')].config", task, filtered=True)
    asks_the_decision(config["url"], [p["name"] for p in config["queryParams"]])


def test_the_web_request_commit_status_asks_the_decision() -> None:
    url = one("$.spec.httpRequest.urlTemplate", recipe("WebRequestCommitStatus"))

    asks_the_decision(url, list(parse_qs(urlsplit(TEMPLATE.sub("x", url)).query)))


# --- evaluated as each engine evaluates, on real answers ------------------------------------


def argo_measurement(metric: dict[str, Any], body: dict[str, Any]) -> str:
    """A web metric's measurement of an answer (argo-rollouts utils/evaluate EvaluateResult,
    with both conditions given): Failed, else Successful, else Inconclusive."""
    result = one(metric["provider"]["web"]["jsonPath"].strip("{}"), body)
    if evaluate(metric["failureCondition"], {"result": result}):
        return "Failed"
    if evaluate(metric["successCondition"], {"result": result}):
        return "Successful"
    return "Inconclusive"


def argo_analysis(metric: dict[str, Any], bodies: Iterator[dict[str, Any]]) -> str:
    """The metric's phase over the answers of successive measurements (argo-rollouts
    analysis.go assessMetricStatus, with no count): Failed past failureLimit failures,
    Inconclusive past inconclusiveLimit inconclusive ones, Successful at
    consecutiveSuccessLimit successes in a row, else Running."""
    failed = inconclusive = in_a_row = 0
    for body in bodies:
        measurement = argo_measurement(metric, body)
        failed += measurement == "Failed"
        inconclusive += measurement == "Inconclusive"
        in_a_row = in_a_row + 1 if measurement == "Successful" else 0
        if failed > metric["failureLimit"]:
            return "Failed"
        if inconclusive > metric["inconclusiveLimit"]:
            return "Inconclusive"
        if in_a_row >= metric["consecutiveSuccessLimit"]:
            return "Successful"
    return "Running"


async def test_the_analysis_passes_fails_and_waits_as_the_gate(decisions: Decisions) -> None:
    [metric] = recipe("AnalysisTemplate")["spec"]["metrics"]
    bodies = decisions.bodies

    assert {v: argo_measurement(metric, bodies[v]) for v in VERDICTS} == {
        "passed": "Successful",
        "pending": "Inconclusive",
        "failed": "Failed",
    }
    hour = metric["inconclusiveLimit"]
    assert argo_analysis(metric, iter([bodies["pending"]] * hour + [bodies["passed"]])) == (
        "Successful"
    )
    assert argo_analysis(metric, iter([bodies["pending"]] * 3 + [bodies["failed"]])) == "Failed"
    assert argo_analysis(metric, iter([bodies["pending"]] * hour)) == "Running"
    assert argo_analysis(metric, iter([bodies["pending"]] * (hour + 1))) == "Inconclusive"


def kargo_step(config: dict[str, Any], status: int, body: dict[str, Any]) -> str:
    """The `http` step's outcome (kargo http_requester.go): a met failure expression fails it
    terminally, else a met success expression succeeds, else it runs on and asks again."""
    response = {"status": status, "headers": {}, "body": body}
    if evaluate(config["failureExpression"], {"response": response}):
        return "Failed"
    if evaluate(config["successExpression"], {"response": response}):
        return "Succeeded"
    return "Running"


async def test_the_kargo_http_step_succeeds_fails_and_waits_as_the_gate(
    decisions: Decisions, client: httpx.AsyncClient, read_token: str
) -> None:
    config = one("$.spec.steps[?(@.uses == 'http')].config", recipe("PromotionTask"), filtered=True)
    unknown = await client.get(
        DECISION,
        params={"environment": "dev", "workload": WORKLOAD, "version": "9.9.9"},
        headers=bearer(read_token),
    )
    unavailable = {"error": "store_unavailable", "detail": "the database cannot be reached"}

    assert {v: kargo_step(config, 200, decisions.bodies[v]) for v in VERDICTS} == {
        "passed": "Succeeded",
        "pending": "Running",
        "failed": "Failed",
    }
    assert unknown.status_code == 404
    assert kargo_step(config, 404, unknown.json()) == "Failed"
    assert kargo_step(config, 503, unavailable) == "Running"


def promoter_phase(expression: str, response: dict[str, Any] | None, phase: str) -> str:
    """The commit status phase (gitops-promoter, WebRequestCommitStatus success.when in the
    environments context): the object form's `phase`, an empty one meaning pending."""
    value = evaluate(expression, {"Response": response, "Phase": phase})
    assert isinstance(value, dict), value
    return value.get("phase") or "pending"


async def test_the_commit_status_follows_the_gate(decisions: Decisions) -> None:
    expression = one("$.spec.success.when.expression", recipe("WebRequestCommitStatus"))

    def answered(verdict: str) -> dict[str, Any]:
        return {"StatusCode": 200, "Headers": {}, "Body": decisions.bodies[verdict]}

    assert {v: promoter_phase(expression, answered(v), "") for v in VERDICTS} == {
        "passed": "success",
        "pending": "pending",
        "failed": "failure",
    }
    # A reconcile that made no request keeps the phase the last one found.
    for phase in ("success", "pending", "failure", ""):
        assert promoter_phase(expression, None, phase) == (phase or "pending")


# --- the CI recipes run what the command line has --------------------------------------------


def ci_commands() -> list[tuple[str, list[str]]]:
    """Every `fleetmark ...` command of the CI recipes, as its words."""
    commands = []
    for folder in CI_RECIPES:
        for path in sorted((RECIPES / folder).iterdir()):
            document = yaml.safe_load(path.read_text())
            lines = [m.value for m in jsonpath("$..run").find(document)]
            lines += [line for m in jsonpath("$..script").find(document) for line in m.value]
            for line in lines:
                words = shlex.split(line)
                if words[0] == "fleetmark":
                    commands.append((f"{folder}/{path.name}", words[1:]))
    return commands


def test_both_ci_recipes_wait_for_the_gate() -> None:
    assert sorted({(where.split("/")[0], tuple(words[:2])) for where, words in ci_commands()}) == [
        ("github-actions", ("gate", "wait")),
        ("gitlab-ci", ("gate", "wait")),
    ]


@pytest.mark.parametrize(
    ("where", "words"),
    ci_commands(),
    ids=lambda value: value if isinstance(value, str) else " ".join(value[:2]),
)
def test_a_ci_recipe_runs_a_command_and_options_the_cli_has(where: str, words: list[str]) -> None:
    path = [word for word in words if not word.startswith("-")][:2]
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    options = {option for parameter in command.params for option in parameter.opts}

    assert CliRunner().invoke(app, [*path, "--help"]).exit_code == 0
    used = {word for word in words if word.startswith("--")}
    assert used <= options, where

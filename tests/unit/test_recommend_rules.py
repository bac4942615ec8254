"""Measuring a target in the cloud: the rule on an LLM's cloud candidates (passing and failing, the
message asserted through the real loader), and the requests rendered for a target — valid against
botocore's model, their refusals said in words."""

from __future__ import annotations

import re

import pytest

from sagestack.core.catalog.service_model import service_model
from sagestack.core.deployment import Deployment
from sagestack.core.names import PACKAGE_VERSION_DIGITS_MAX, Names
from sagestack.core.states import formatted
from sagestack.endpoints.recommend import (
    STAND_IN_VERSION,
    ai_recommendation_request,
    inference_recommendations_request,
    resolve_recommendations,
    stand_in_workload_arn,
    validate_recommendation,
)
from sagestack.endpoints.recommend_states import recommendation_request
from tests.unit.test_llm_rules import llm_endpoint
from tests.unit.test_rules import findings
from tests.unit.test_slo_rules import DIGITS, with_slo

LLM_SLO = "    slo: {ttft_ms: 500, tokens: {input: 512, output: 128}, candidates: %s}\n"


def test_endpoint_slo_cloud_candidates(project):
    ok = llm_endpoint() + LLM_SLO % "[ml.g5.2xlarge, ml.g6e.xlarge]"
    assert findings(project, "endpoint-slo-cloud-candidates", ok) == []
    bad = (
        llm_endpoint()
        + LLM_SLO % "[ml.g5.2xlarge, ml.g6.2xlarge, ml.inf2.xlarge, ml.g6e.xlarge, ml.p5.48xlarge]"
    )
    assert findings(project, "endpoint-slo-cloud-candidates", bad) == [
        "endpoints.chat.slo.candidates.2: ml.inf2.xlarge is not an instance type an AI recommendation job "
        "measures (botocore's AIRecommendationInstanceType); `--recommend` leaves it out",
        "endpoints.chat.slo.candidates.4: ml.p5.48xlarge: an AI recommendation job measures 3 candidates at "
        "most; `--recommend` leaves it out",
    ]
    # a classic endpoint's candidates go to Inference Recommender, which takes CPU types too
    assert findings(project, "endpoint-slo-cloud-candidates", with_slo(DIGITS, "{p95_ms: 20}")) == []


def _resolved(project, text):  # type: ignore[no-untyped-def]
    spec = project.spec(text).load().spec
    (r,) = resolve_recommendations(Names(spec.project, "dev"), spec.endpoints)
    return r


def test_an_llm_target_with_no_measurable_candidate_is_refused_in_words(project):
    r = _resolved(project, llm_endpoint("ml.g5.2xlarge") + LLM_SLO % "[ml.inf2.xlarge]")
    with pytest.raises(ValueError, match="none is an instance type an AI recommendation job measures"):
        validate_recommendation(r, Deployment.stand_ins(region="us-east-1"), mlflow_arn=None)


def test_requests_follow_the_target(project):
    d = Deployment.stand_ins(region="us-east-1")
    r = _resolved(project, with_slo(DIGITS, "{p99_ms: 40.5, requests_per_second: 35}"))
    request = inference_recommendations_request(r, d)
    assert request["StoppingConditions"] == {
        "MaxInvocations": 2100,  # per minute
        "ModelLatencyThresholds": [{"Percentile": "P99", "ValueInMilliseconds": 41}],
    }
    assert [c["InstanceType"] for c in request["InputConfig"]["EndpointConfigurations"]] == ["ml.c5.xlarge"]
    validate_recommendation(r, d, mlflow_arn=None)
    llm = _resolved(
        project, llm_endpoint() + "    slo: {tokens_per_second: 30, tokens: {input: 8, output: 8}}\n"
    )
    request = ai_recommendation_request(llm, d, workload_arn=stand_in_workload_arn(llm, d))
    assert request["PerformanceTarget"] == {"Constraints": [{"Metric": "throughput"}, {"Metric": "cost"}]}
    assert request["ComputeSpec"] == {"InstanceTypes": ["ml.g5.2xlarge"]}  # the endpoint's own
    assert request["InferenceSpecification"] == {"Framework": "LMI"}
    # the same target names the same job; another target, another job
    again = _resolved(project, with_slo(DIGITS, "{p99_ms: 40.5, requests_per_second: 35}"))
    other = _resolved(project, with_slo(DIGITS, "{p99_ms: 40.5, requests_per_second: 36}"))
    assert again.job_name("1") == r.job_name("1") != other.job_name("1")
    assert len(r.job_name("1")) <= 63 and r.job_name("1").startswith("digits-dev-digits-")
    # the package found at run time names the job too: another version, another job
    assert r.job_name("1") != r.job_name("2") and r.job_name("2").endswith("-v2")
    with pytest.raises(ValueError, match="needs the package version found"):
        r.job_name()
    # a pinned package or an LLM's weights: the spec alone names the job, as before
    assert llm.job_name() == llm.job_name("7") and not llm.job_name().endswith("-v7")


def _name_limits(operation: str, member: str) -> tuple[int, re.Pattern[str]]:
    """botocore's max length and pattern for the job's name in `operation`'s request."""
    shape = service_model().operation_model(operation).input_shape.members[member]
    return shape.metadata["max"], re.compile(shape.metadata["pattern"])


@pytest.mark.parametrize("endpoint", ["digits", "a-very-long-endpoint-key-that-fills-the-name-" + "x" * 30])
def test_the_name_a_run_renders_is_within_both_apis_limits_at_its_longest(project, endpoint):
    """Whatever version the run finds (the longest an Integer has), the name fits both APIs, and the
    template the state machine formats gives the name the code means."""
    spec = project.spec(with_slo(DIGITS, "{p95_ms: 20}")).load().spec
    (r,) = resolve_recommendations(
        Names("a-long-project-name", "staging"), {endpoint: spec.endpoints["digits"]}
    )
    assert r.finds_package
    for version in ("1", str(2**31 - 1)):
        name = r.job_name(version)
        for operation, member in (
            ("CreateInferenceRecommendationsJob", "JobName"),
            ("CreateAIRecommendationJob", "AIRecommendationJobName"),
        ):
            longest, pattern = _name_limits(operation, member)
            assert len(name) <= longest and pattern.fullmatch(name), (operation, name)
        assert r.job_name("{}").replace("{}", version) == name
    assert len(STAND_IN_VERSION) == PACKAGE_VERSION_DIGITS_MAX == len(str(2**31 - 1))
    request = recommendation_request(
        r, Deployment.stand_ins(region="us-east-1"), workload_arn="w", mlflow_arn=None
    )
    assert request["JobName.$"] == "$.package.JobName" and "JobName" not in request


def test_a_rendered_text_escapes_what_intrinsic_functions_reserve():
    assert (
        formatted("job {} of 'a' {b} \\ ok", "$.x")
        == "States.Format('job {} of \\'a\\' \\{b\\} \\\\ ok', $.x)"
    )
    assert formatted("{}-{}", "$.a", "$.b") == "States.Format('{}-{}', $.a, $.b)"


def test_endpoint_slo_on_registration(project):
    """On registration: a classic model served from its group unpinned, nothing else."""
    ok = with_slo(DIGITS, "{p95_ms: 20, on_registration: true}")
    assert findings(project, "endpoint-slo-on-registration", ok) == []
    llm = llm_endpoint() + LLM_SLO % "[ml.g5.2xlarge]"
    assert findings(project, "endpoint-slo-on-registration", llm) == []  # off: nothing to say
    assert findings(
        project,
        "endpoint-slo-on-registration",
        llm.replace("candidates:", "on_registration: true, candidates:"),
    ) == [
        "endpoints.chat.slo.on_registration: 'chat' serves an llm: (its weights in S3), which no model "
        "package approval changes; drop on_registration and measure with `sagestack run chat --recommend`"
    ]
    pinned = ok.replace(
        "    model: {from: classifier}\n",
        "    model: {from: classifier}\n"
        "    model_package: arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3\n",
    )
    assert findings(project, "endpoint-slo-on-registration", pinned) == [
        "endpoints.digits.slo.on_registration: 'digits' serves the pinned model_package "
        "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3, which no approval changes; "
        "drop on_registration in this environment (set it in the overlays of those that serve the group's "
        "newest approved version) or unpin model_package"
    ]


def test_on_registration_in_a_pinned_environment_is_refused_at_the_overlays_line(project):
    """Set in the base file and pinned by a promotion in prod's overlay: the error names the file,
    line and key that ask for it, and says what to do."""
    project.spec(with_slo(DIGITS, "{p95_ms: 20, on_registration: true}"))
    project.env("prod", "endpoints:\n  digits:\n    model_package: arn:aws:sagemaker:us-east-1:111111111111:"
                "model-package/digits-prod/3\n")  # fmt: skip
    (error,) = [e for e in project.errors("prod") if "warning" not in e]
    assert error.startswith("config/sagestack.yaml:15:40: ")
    assert "endpoints.digits.slo.on_registration: 'digits' serves the pinned model_package" in error
    assert error.endswith("or unpin model_package [endpoint-slo-on-registration]")
    project.env("dev", "endpoints:\n  digits:\n    slo: {on_registration: true}\n")
    project.spec(with_slo(DIGITS, "{p95_ms: 20}"))
    assert project.load("dev").spec.endpoints["digits"].slo.on_registration  # set in one overlay: fine
    assert project.load("prod").spec.endpoints["digits"].slo.on_registration is False


def test_turning_on_registration_on_renames_no_job(project):
    off = _resolved(project, with_slo(DIGITS, "{p95_ms: 20}"))
    on = _resolved(project, with_slo(DIGITS, "{p95_ms: 20, on_registration: true}"))
    assert on.on_registration and not off.on_registration
    assert on.job_name("3") == off.job_name("3")  # what starts the job is not what it measures

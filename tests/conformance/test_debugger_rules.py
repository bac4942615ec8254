"""The SageMaker SDK's Debugger building blocks (smdebug-rulesconfig, what `rule_configs` returns and
how actions are serialized) judge sagestack's rendering of rules, collections and actions."""

from __future__ import annotations

import json

import pytest

from sagestack.core.catalog.debugger import action_json, debugger_rules
from sagestack.core.deployment import Deployment
from sagestack.training.context import RequestContext
from sagestack.training.debugger import debugger_configs
from sagestack.training.models import DebuggerSpec

pytestmark = pytest.mark.conformance
rc = pytest.importorskip("smdebug_rulesconfig", reason="make setup installs smdebug-rulesconfig")
actions = pytest.importorskip("smdebug_rulesconfig.actions.actions")
utils = pytest.importorskip("smdebug_rulesconfig.actions.utils")

CTX = RequestContext(
    deployment=Deployment(
        region="us-east-1",
        account="123456789012",
        role_arn="arn:aws:iam::123456789012:role/r",
        bucket="b",
        kms_key_id="k",
    ),
    source_s3_uri="s3://b/s.tar.gz",
    image_uri="i",
    rules_image_uri="503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
)


@pytest.mark.parametrize("rule", sorted(debugger_rules()))
def test_the_rule_table_is_the_packages(rule: str) -> None:
    config = getattr(rc, rule)()
    ours = debugger_rules()[rule]
    assert ours["name"] == config["DebugRuleConfiguration"]["RuleConfigurationName"]
    assert ours["parameters"] == config["DebugRuleConfiguration"]["RuleParameters"]
    assert ours["collections"] == config.get("CollectionConfigurations", [])


def test_action_json_is_what_the_sdk_sends_and_the_rule_container_parses() -> None:
    job = "digits-prod-classifier-1a2b3c4d-0"
    theirs = actions.ActionList(
        actions.StopTraining(job), actions.Email("ml@example.com"), actions.SMS("+14155550100")
    )
    ours = action_json(
        [
            ("stoptraining", {"training_job_prefix": job}),
            ("email", {"endpoint": "ml@example.com"}),
            ("sms", {"endpoint": "+14155550100"}),
        ]
    )
    assert ours == theirs.serialize()
    # the rule container reads it as json.loads("<action_json>") (utils.validate_action_str's exec)
    utils.validate_action_str(ours, [a.action_parameters for a in theirs.actions])


def test_rendered_rules_carry_the_packages_parameters_collections_and_actions() -> None:
    spec = DebuggerSpec.model_validate(
        {
            "rules": [
                "vanishing_gradient",
                {"rule": "loss_not_decreasing", "parameters": {"mode": "TRAIN"}, "email": ["ml@example.com"]},
                "dead_relu",
            ],
            "stop_on_issue": True,
            "hook": {"collections": {"losses": {"save_interval": 10}}},
        }
    )
    hook, rules = debugger_configs(spec, CTX, job_name="job-1", s3_output="s3://b/debugger/job/")
    by_name = {r["RuleConfigurationName"]: r for r in rules}
    assert (
        by_name["DeadRelu"]["RuleParameters"]["rule_to_invoke"]
        == rc.dead_relu()["DebugRuleConfiguration"]["RuleParameters"]["rule_to_invoke"]
    )
    params = by_name["LossNotDecreasing"]["RuleParameters"]
    assert params["mode"] == "TRAIN"
    sdk = actions.ActionList(actions.StopTraining("job-1"), actions.Email("ml@example.com")).serialize()
    assert params["action_json"] == sdk
    collections = {
        c["CollectionName"]: c.get("CollectionParameters") for c in hook["CollectionConfigurations"]
    }
    # every collection a rule needs is saved by the hook; the hook's own parameters win
    for name in ("vanishing_gradient", "loss_not_decreasing", "dead_relu"):
        for c in getattr(rc, name)().get("CollectionConfigurations", []):
            assert c["CollectionName"] in collections
    assert collections["losses"] == {"save_interval": "10"}
    assert json.loads(json.dumps(hook))  # plain data

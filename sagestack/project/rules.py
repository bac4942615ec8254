"""Every feature's semantic rules over a validated spec, registered by importing them here."""

from sagestack.clusters import rules as clusters
from sagestack.core.rules import RULES, Finding, Rule, RuleContext, check_spec, rule, run_rule
from sagestack.delivery import rules as delivery
from sagestack.endpoints import rules as endpoints
from sagestack.endpoints import rules_modes as endpoint_modes
from sagestack.foundation import rules as foundation
from sagestack.training import rules as training
from sagestack.tuning import rules as tuning

FEATURE_RULES = (clusters, delivery, endpoints, endpoint_modes, foundation, training, tuning)

__all__ = ["FEATURE_RULES", "RULES", "Finding", "Rule", "RuleContext", "check_spec", "rule", "run_rule"]

"""Semantic rules over a validated spec. Importing this package registers every rule."""

from sagestack.spec.rules import clusters as clusters
from sagestack.spec.rules import delivery as delivery
from sagestack.spec.rules import foundation as foundation
from sagestack.spec.rules import serving as serving
from sagestack.spec.rules import serving_modes as serving_modes
from sagestack.spec.rules import training as training
from sagestack.spec.rules import tuning as tuning
from sagestack.spec.rules.registry import RULES, Finding, Rule, RuleContext, check_spec, rule, run_rule

__all__ = ["RULES", "Finding", "Rule", "RuleContext", "check_spec", "rule", "run_rule"]

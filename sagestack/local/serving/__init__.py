"""Local serving (`sagestack local serve`, `local transform`, `local compile`, `local monitor`): an
endpoint's container and the SageMaker runtime API on localhost. The model's inference.py handlers
loaded as the PyTorch inference toolkit loads them (handlers.py), batched with TorchServe's meaning
(batching.py), a SavedModel answered as the TensorFlow Serving container answers it
(tf_serving.py); InvokeEndpoint and InvokeEndpointAsync with results, failures and capture files
where the cloud writes them, under the local S3 root (s3_paths.py); batch transform with
CreateTransformJob's semantics, Neo's trace (compile.py) and Model Monitor's data-quality check.
Judged by AWS's own code: sagemaker-inference and sagemaker-pytorch-inference
(tests/conformance/test_inference_toolkit.py), TorchServe (test_torchserve_stack.py), and boto3's
sagemaker-runtime client pointed at the local server."""

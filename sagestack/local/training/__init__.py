"""Local training (`sagestack local train`, `local tune`): a job's own CreateTrainingJob request,
rendered once (job.py), run on simulated hosts. What SageMaker does before the container starts
(each host's /opt/ml folder, its config files and channels, the platform's environment: hosts.py)
and what the training container's toolkit does in it: the runner it picks (torchrun, MPI or SMDDP
ranks, TF_CONFIG and parameter servers, the plain process: launch.py), requirements.txt, the
failure file; the processes followed and killed as one (processes.py), the metrics read from the
log as SageMaker reads them, the run folder, the local MLflow store, tuning trials. A request under
the drivers contract (the SDK v3 ModelTrainer's ContainerEntrypoint) has its hosts laid out here
(drivers_contract.py) and run in the drivers room's sandbox. Judged by AWS's own code: the
sagemaker-training toolkit and sagemaker-pytorch-training (tests/conformance/test_training_toolkit.py,
test_contract_functions.py), the TensorFlow training toolkit (test_tensorflow_toolkit.py)."""

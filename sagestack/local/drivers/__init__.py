"""The drivers contract's container, emulated: the sandbox a simulated host of a `launcher: drivers`
job runs in (sandbox.py, started by sandbox_init.py: a network namespace per run, a mount namespace
per host with its own /opt/ml, /etc/hosts, /etc/environment and /tmp, every other mount read-only)
and the stand-ins its drivers call (nvidia-smi, neuron-ls, sshd, and mpirun.py: one host's MPI
ranks started directly with Open MPI's variables). AWS's sm_train.sh and the SDK v3 drivers run in
it unchanged, so sagemaker-train's container drivers are the implementation and the judge
(tests/conformance/test_drivers_contract.py). The training room lays out
the hosts and starts them here; nothing here knows the job."""

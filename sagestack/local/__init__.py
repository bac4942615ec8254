"""Run a spec's work on this machine: the SageMaker container contract, emulated."""

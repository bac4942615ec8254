"""Run a spec's work on this machine: the SageMaker container contract, emulated.

Five rooms, each its own system: `training/` (a training job's hosts under the toolkit contract,
and the drivers contract's hosts), `drivers/` (the sandbox a drivers-contract host runs in, with its
stand-ins), `serving/` (an endpoint's container and the runtime API, batch transform, compile,
monitor), `llm/` (an LLM endpoint in its container's schema) and `bench/` (an endpoint's local
configurations measured against its slo:). A room imports only itself, the few modules at this
level and the rooms it is built on: training uses drivers, llm uses serving, bench measures serving
and llm (tests/unit/test_local_rooms.py). This level holds only what several rooms share: `guard.py` (the
subreaper every process of a run starts under: training's processes and the drivers' sandbox),
`private.py` (0700/0600 outputs: training's MLflow store, serving's captures, results and models),
`errors.py` (LocalRunError: what stops a local run, raised by training and the sandbox),
`pasteable.py` (commands and paths printed to be pasted: training's mlflow/tensorboard lines,
serving's compiled model)."""

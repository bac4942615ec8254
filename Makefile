# sagestack: `make demo` and `make test` work on a fresh clone (they set everything up first).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
export PYTHONDONTWRITEBYTECODE := 1
# mkdocs-material prints a banner about its successor on every build
export NO_MKDOCS_2_WARNING := 1
# Synthesis needs no AWS account; make sure nothing on this machine is picked up by accident.
export AWS_EC2_METADATA_DISABLED := true

.PHONY: setup scanners tf-toolkit hyperpod-template java chromium docs demo test unit e2e lint synth bench bench-smoke schema mutate mutate-smoke clean

setup: $(VENV)/.installed node_modules/.installed java chromium scanners tf-toolkit hyperpod-template

# AWS's HyperPodPyTorchJob template and schema (tests/constructs/test_cluster_pytorch_job.py): the files
# only, with no dependencies, as its pydantic models import the HyperPod CLI, whose pins would move ours.
hyperpod-template: .venv-hyperpod/.installed

.venv-hyperpod/.installed: tests/constructs/requirements-hyperpod.txt
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --no-deps --target .venv-hyperpod -r $<
	touch $@

# The IAM tier's scanners (tests/iam), each in a virtualenv of its own: their pins would move the
# project's (checkov downgrades boto3/botocore). The tests call them through a subprocess.
scanners: .venv-scan/.installed .venv-checkov/.installed

.venv-%/.installed: tests/iam/requirements-%.txt
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	.venv-$*/bin/python -m pip check
	touch $@

# AWS's TensorFlow training toolkit (sagemaker-tensorflow-training 20.5.0 on sagemaker-training 4.8.3), the
# judge of the TensorFlow container's emulation (tests/support/tf_toolkit.py), in a virtualenv of its own:
# it requires sagemaker-training<=4.8.3 (the project runs 5.1.4). Its own pins are installed --no-deps
# because none can coexist with TensorFlow 2.21: it requires numpy<1.24 (TF 2.21 needs numpy>=1.26) and
# sagemaker-training 4.8.3 requires protobuf<=3.20.3 (TF 2.21 needs protobuf>=6.31.1); so no pip check,
# an import of the toolkit's entry point instead.
tf-toolkit: .venv-tf/.installed

.venv-tf/.installed: tests/conformance/requirements-tf.txt tests/conformance/requirements-tf-toolkit.txt
	test -x .venv-tf/bin/python || $(PYTHON) -m venv .venv-tf
	.venv-tf/bin/python -m pip install --quiet --disable-pip-version-check -r tests/conformance/requirements-tf.txt
	.venv-tf/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r tests/conformance/requirements-tf-toolkit.txt
	TF_CPP_MIN_LOG_LEVEL=3 .venv-tf/bin/python -c "import sagemaker_tensorflow_container.training"
	touch $@

# TorchServe (the PyTorch inference container's model server, in the conformance tier) runs on Java.
java:
	@command -v java >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null; }

# The docs site's browser test (tests/docs) opens the built site in Debian's headless Chromium.
chromium:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }

# The documentation site into site/ (gitignored): the guides in docs/, and the reference pages
# (spec, rules, CLI, construct API) generated from the code by docs/hooks/ on every build.
docs: $(VENV)/.installed node_modules/.installed
	$(BIN)/mkdocs build --strict --site-dir site

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[train,dev,conformance,tensorflow]'
	$(BIN)/python -m pip check
	touch $@

# The CDK CLI and the Node.js LTS that runs it and jsii (package.json's `node`): node_modules/.bin is
# first on PATH above, so every target runs on the pinned release, never on an end-of-life one.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	test "$$(node --version)" = "v$$(node -p 'require("./package.json").devDependencies.node')"
	touch $@

synth: setup
	rm -rf cdk.out
	cdk synth --quiet

demo: synth
	$(BIN)/sagestack validate
	@echo "Synthesized every environment into cdk.out:"; ls cdk.out | grep -E '^assembly-' || true
	$(BIN)/sagestack local train classifier --env dev --fresh
	$(BIN)/sagestack local train classifier-spot --env dev --procs 2 --fresh --set epochs=3
	$(BIN)/sagestack local compile digits --env dev
	$(BIN)/sagestack local serve digits --env dev --port 18080 --predict 5
	$(BIN)/sagestack local transform score --env dev --sample 20
	$(BIN)/sagestack local serve chat --env staging --port 18081 --prompt "What does spot training need?"

# mypy runs beside the tests (alone it kept one CPU busy for minutes while the other idled); its report
# follows theirs, and either one failing fails the target. The tests: one worker per CPU; a module's
# tests stay on one worker (its synthesized app and moto server are shared), the slowest units start
# first (tests/support/schedule.py).
test: setup
	$(BIN)/ruff check .
	$(BIN)/sagestack schema --check
	typed=$$(mktemp); $(BIN)/mypy >$$typed 2>&1 & mypy=$$!; \
	$(BIN)/python -m pytest -q -n auto --dist loadfile --durations=15; tests=$$?; \
	wait $$mypy; types=$$?; echo "mypy:"; cat $$typed; rm -f $$typed; \
	test $$tests = 0 -a $$types = 0

unit: setup
	$(BIN)/python -m pytest -q -m "not synth and not e2e and not train"

# bootstrap + deploy + run + destroy against a moto server on loopback (also part of `make test`)
e2e: setup
	$(BIN)/python -m pytest -q -m e2e

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

schema: setup
	$(BIN)/sagestack schema --output schema

bench: setup
	$(BIN)/python bench/synth.py
	$(BIN)/python bench/train.py
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/transform.py
	$(BIN)/python bench/cli.py
	$(BIN)/python bench/load.py
	$(BIN)/python bench/gpu.py
	$(BIN)/python bench/llm_serve.py

# Every benchmark once on small inputs (seconds to a minute each): that they still run, not what they measure
# (tests/synth/test_bench_smoke.py runs the same).
bench-smoke: setup
	$(BIN)/python bench/synth.py --smoke
	$(BIN)/python bench/train.py --smoke
	$(BIN)/python bench/serve.py --smoke
	$(BIN)/python bench/transform.py --smoke
	$(BIN)/python bench/cli.py --smoke
	$(BIN)/python bench/load.py --smoke
	$(BIN)/python bench/gpu.py --smoke
	$(BIN)/python bench/llm_serve.py --smoke

# Mutation testing (mutmut) of request rendering, capacity, the lock, the container contract, the launcher,
# the catalog and the rules against their fast unit tests ([tool.mutmut] in pyproject.toml): the kill rate
# of the non-equivalent mutants. Not part of `make test` (tens of minutes); mutants/ keeps the verdicts, so
# a second run resumes. mutate-smoke runs one small module in a scratch copy (tests/unit/test_mutation_smoke.py).
mutate: setup
	$(BIN)/python -m tests.support.mutation

mutate-smoke: setup
	$(BIN)/python -m tests.support.mutation --smoke

clean:
	rm -rf cdk.out .pytest_cache

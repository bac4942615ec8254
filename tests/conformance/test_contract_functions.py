"""sagestack's re-implementation of the toolkit's mapping functions, against the toolkit's own
(sagemaker_training/mapping.py), on generated hyperparameters (hypothesis)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagestack.core.contract import env_value, split_hyperparameters, to_cmd_args

pytestmark = pytest.mark.conformance
mapping = pytest.importorskip("sagemaker_training.mapping", reason="make setup installs sagemaker-training")
params = pytest.importorskip("sagemaker_training.params")

keys = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=12),
    st.sampled_from(["x", "k", "lr", "sagemaker_program", "sagemaker_mpi_enabled", "mp_parameters"]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=20),
)
values = st.one_of(
    scalars,
    st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=3),
    st.lists(scalars, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, values, max_size=8))
def test_arguments_are_the_toolkits(hps: dict) -> None:
    assert to_cmd_args(hps) == mapping.to_cmd_args(hps)


@settings(max_examples=300, deadline=None)
@given(values)
def test_variable_values_are_the_toolkits(value) -> None:
    assert env_value(value) == mapping.to_env_vars({"x": value})["SM_X"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, scalars, max_size=8))
def test_framework_and_user_hyperparameters_split_as_the_toolkit_splits(hps: dict) -> None:
    raw = {k: json.dumps(v) for k, v in hps.items()}
    split = mapping.split_by_criteria(
        {k: json.loads(v) for k, v in raw.items()},
        keys=params.SAGEMAKER_HYPERPARAMETERS,
        prefix=params.SAGEMAKER_PREFIX,
    )
    ours = split_hyperparameters(raw)
    assert ours.sagemaker == split.included
    assert ours.user == split.excluded


def test_the_toolkits_own_keys_are_the_same() -> None:
    from sagestack.core.contract import SAGEMAKER_HYPERPARAMETERS

    assert SAGEMAKER_HYPERPARAMETERS == params.SAGEMAKER_HYPERPARAMETERS

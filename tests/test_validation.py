"""boltzlab.validation: the checks at the public doors accept good input and refuse bad input
with a ValidationError that names the argument, what came and what was expected.

Properties checked for every public check: good values pass through (converted, copied,
never aliased); wrong types, ranges, ranks, unit counts, empty data, NaN/inf and non-binary
values are refused by name; ValidationError is a ValueError, so callers catching that keep
working.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import boltzlab as bl
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.validation import (
    as_binary_tensor,
    as_model_data,
    as_real_tensor,
    check_nonnegative_int,
    check_positive_int,
    check_probability,
    require,
)


def test_require_raises_with_the_message():
    require(True, "never shown")
    with pytest.raises(ValidationError, match=r"^n_sweeps must be positive$"):
        require(False, "n_sweeps must be positive")
    assert issubclass(ValidationError, ValueError) and issubclass(ValidationError, BoltzlabError)


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.int32(1)])
def test_positive_int_accepts_integers_from_one(value):
    result = check_positive_int(value, "n_chains")
    assert result == int(value) and type(result) is int


@pytest.mark.parametrize("value", [0, -2, 2.0, 2.5, True, "3", None, math.nan])
def test_positive_int_refuses_the_rest_by_name(value):
    with pytest.raises(ValidationError, match=r"n_chains must be a positive integer, got "):
        check_positive_int(value, "n_chains")


@pytest.mark.parametrize("value", [0, 1, 40])
def test_nonnegative_int_accepts_zero(value):
    assert check_nonnegative_int(value, "burn_in") == value


@pytest.mark.parametrize("value", [-1, 1.0, False, "0", None])
def test_nonnegative_int_refuses_the_rest_by_name(value):
    with pytest.raises(ValidationError, match=r"burn_in must be a non-negative integer, got "):
        check_nonnegative_int(value, "burn_in")


@pytest.mark.parametrize("value", [0, 0.0, 0.3, 1, "0.5", np.float32(0.25), torch.tensor(0.75)])
def test_probability_accepts_numbers_in_the_unit_interval(value):
    assert check_probability(value, "alpha") == pytest.approx(float(value))
    assert type(check_probability(value, "alpha")) is float


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-0.1, r"alpha must be in \[0, 1\], got -0.1"),
        (1.5, r"alpha must be in \[0, 1\], got 1.5"),
        (math.nan, r"alpha must be in \[0, 1\], got nan"),
        ("half", r"alpha must be a number in \[0, 1\], got 'half'"),
        (None, r"alpha must be a number in \[0, 1\], got None"),
    ],
)
def test_probability_refuses_the_rest_by_name(value, message):
    with pytest.raises(ValidationError, match=message):
        check_probability(value, "alpha")


# ---------------------------------------------------------------------------- binary data
@pytest.mark.parametrize(
    "data",
    [
        [[0, 1, 1], [1, 0, 0]],
        np.array([[0, 1, 1], [1, 0, 0]], dtype=np.uint8),
        np.array([[False, True, True], [True, False, False]]),
        torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], dtype=torch.float64),
    ],
)
def test_binary_data_is_converted_to_a_copy(data):
    result = as_binary_tensor(data, "data", n_units=3, dtype=torch.float64, device="cpu")
    assert result.dtype == torch.float64 and result.device.type == "cpu" and result.shape == (2, 3)
    assert result.tolist() == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    if isinstance(data, torch.Tensor):
        result[0, 0] = 1.0
        assert data[0, 0] == 0.0, "the input must not be aliased"
    assert as_binary_tensor(data, "data").dtype == torch.float32, "float32 by default"


def test_binary_data_detaches_tensors_that_require_grad():
    data = torch.tensor([[0.0, 1.0]], requires_grad=True)
    result = as_binary_tensor(data, "batch")
    assert not result.requires_grad and result.tolist() == [[0.0, 1.0]]


@pytest.mark.parametrize(
    ("data", "n_units", "message"),
    [
        (torch.zeros(3), None, r"data must have shape \(n_examples, n_units\), got shape \(3,\)"),
        (torch.zeros(2, 2, 2), None, r"got shape \(2, 2, 2\); flatten images first"),
        (torch.zeros(2, 4), 3, "data has 4 units per example, the model expects 3"),
        (torch.zeros(0, 3), 3, r"data is empty \(0 examples\)"),
        (torch.tensor([[0.0, math.nan]]), None, "data contains NaN or infinite values"),
        (torch.tensor([[0.0, math.inf]]), None, "data contains NaN or infinite values"),
        (
            torch.tensor([[0.0, 0.5], [2.0, 1.0]]),
            None,
            r"data must be binary \(0/1\); found 2 other values, e.g. 0.5",
        ),
        (np.array([[0, -1]]), None, r"must be binary .* e\.g\. -1"),
        ([[0, 1], [1]], None, "data could not be read as an array"),
    ],
)
def test_bad_binary_data_is_refused_by_name(data, n_units, message):
    with pytest.raises(ValidationError, match=message):
        as_binary_tensor(data, "data", n_units=n_units)


# ---------------------------------------------------------------------------- real data
def test_real_data_is_converted_to_a_finite_copy():
    data = np.array([[0.5, -1.25, 3.0]])
    result = as_real_tensor(data, "x", n_units=3, dtype=torch.float64)
    assert result.dtype == torch.float64 and result.tolist() == [[0.5, -1.25, 3.0]]
    tensor = torch.tensor([[1.0, 2.0]])
    copy = as_real_tensor(tensor, "x")
    copy[0, 0] = 9.0
    assert tensor[0, 0] == 1.0, "the input must not be aliased"
    assert as_real_tensor([[1, 2]], "x").dtype == torch.float32


@pytest.mark.parametrize(
    ("data", "dtype", "message"),
    [
        (torch.tensor([[True, False]]), torch.float32, "x must hold real numbers, got dtype torch.bool"),
        (torch.tensor([[1 + 2j]]), torch.float32, "x must hold real numbers"),
        (
            torch.tensor([[math.nan, 0.0]]),
            torch.float32,
            r"x contains NaN or infinite values \(in torch.float32\)",
        ),
        # Finite in float64, infinite once cast to the requested float32.
        (
            torch.tensor([[1e300]], dtype=torch.float64),
            torch.float32,
            r"infinite values \(in torch.float32\)",
        ),
        (torch.zeros(4), torch.float32, r"x must have shape \(n_examples, n_units\)"),
    ],
)
def test_bad_real_data_is_refused_by_name(data, dtype, message):
    with pytest.raises(ValidationError, match=message):
        as_real_tensor(data, "x", dtype=dtype)


# ---------------------------------------------------------------------------- model data
def test_model_data_takes_the_models_units_dtype_and_device():
    model = bl.RBM(n_visible=5, n_hidden=2, dtype=torch.float64, generator=0)
    data = np.array([[0, 1, 0, 1, 1], [1, 1, 1, 0, 0]])
    result = as_model_data(model, data, "train")
    assert result.dtype == torch.float64 and result.device == model.device and result.shape == (2, 5)
    with pytest.raises(ValidationError, match="train has 4 units per example, the model expects 5"):
        as_model_data(model, np.zeros((2, 4)), "train")
    with pytest.raises(ValidationError, match="train must be binary"):
        as_model_data(model, np.full((2, 5), 0.5), "train")


def test_model_data_defers_to_the_models_own_check():
    class RealValued:
        layer_sizes = (3, 2)

        def validate_data(self, data, name):
            return as_real_tensor(data, name, n_units=3, dtype=torch.float64)

    result = as_model_data(RealValued(), [[0.25, -1.5, 2.0]], "batch")
    assert result.dtype == torch.float64 and result.tolist() == [[0.25, -1.5, 2.0]]
    with pytest.raises(ValidationError, match="batch has 2 units per example"):
        as_model_data(RealValued(), [[0.25, -1.5]], "batch")


@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
def test_chains_of_another_dtype_get_one_error_naming_both_and_the_fix(operator):
    # A float64 state for a float32 model (states built with numpy, say) used to end in torch's
    # "mat1 and mat2 must have the same dtype" inside a matrix product.
    model = bl.RBM(n_visible=6, n_hidden=4, generator=0)
    chains = model.init_chains(5, generator=0).with_beta(1.0).to(dtype=torch.float64)
    with pytest.raises(
        ValidationError, match=r"torch\.float64 on cpu but the model is torch\.float32.*chains\.to"
    ):
        bl.operators.get(operator).step(model, chains, generator=torch.Generator().manual_seed(0))


@pytest.mark.fault("absurd arguments")
@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("gpu", "'gpu' is not a device torch knows"),
        ("meta", "holds shapes but no values"),
        pytest.param(
            "cuda",
            "asks for a GPU, but this PyTorch sees none",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here"),
        ),
    ],
)
def test_models_refuse_a_device_they_cannot_use(device: str, match: str) -> None:
    for build in (
        lambda: bl.RBM(n_visible=3, n_hidden=2, device=device),
        lambda: bl.DBM(layer_sizes=[3, 2, 2], device=device),
        lambda: GaussianRBM(n_visible=3, n_hidden=2, device=device),
    ):
        with pytest.raises(ValidationError, match=match):
            build()


@pytest.mark.fault("absurd arguments")
@pytest.mark.parametrize("operator", ["gibbs", "flip", "mixture"])
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v, h: (v[:, :3], h), r"layers of 3 \+ 3 units but the model's layers have 4 \+ 3 units"),
        (lambda v, h: (v,), r"layers of 4 units but the model's layers have 4 \+ 3 units"),
        (
            lambda v, h: (torch.full_like(v, 0.5), h),
            r"layer 0 must hold 0/1 values; found 20 others, e\.g\. 0\.5",
        ),
        (lambda v, h: (v, h - 1), r"layer 1 must hold 0/1 values"),
    ],
    ids=["narrow", "missing layer", "halves", "minus one"],
)
def test_operators_refuse_chains_that_are_no_state_of_the_model(operator, change, message):
    """A wrong width used to end in torch's matmul error, and 0.5 was moved silently."""
    model = bl.RBM(n_visible=4, n_hidden=3, generator=0)
    good = model.init_chains(5, generator=torch.Generator().manual_seed(0))
    bad = bl.Chains(layers=change(*good.layers), beta=good.beta)
    with pytest.raises(ValidationError, match=message):
        bl.operators.get(operator).step(model, bad, generator=torch.Generator().manual_seed(1))


def test_operator_output_is_checked_once_and_then_trusted():
    """The 0/1 check costs a synchronisation, so it runs on chains a caller built and not on an
    operator's own output; a caller who edits the tensors builds new Chains, checked again."""
    model = bl.RBM(n_visible=4, n_hidden=3, generator=0)
    generator = torch.Generator().manual_seed(0)
    chains = model.init_chains(5, generator=generator)
    operator = bl.operators.get("gibbs")
    moved, _ = operator.step(model, chains, generator=generator)
    assert (
        moved.values_checked and moved.with_beta(0.5).values_checked and moved.select(slice(2)).values_checked
    )
    assert moved == bl.Chains(layers=moved.layers, beta=moved.beta)  # not part of equality
    edited = bl.Chains(layers=(moved.layers[0] * 0.5, moved.layers[1]), beta=moved.beta)
    with pytest.raises(ValidationError, match="must hold 0/1 values"):
        operator.step(model, edited, generator=generator)


@pytest.mark.fault("absurd arguments")
@pytest.mark.parametrize(
    "call",
    [
        lambda model, data: bl.log_likelihood(model, data, log_z=1.0),
        lambda model, data: model.set_base_rate(data),
        lambda model, data: bl.train(model, data, n_updates=1, batch_size=2),
    ],
    ids=["log_likelihood", "set_base_rate", "train"],
)
def test_data_on_the_meta_device_is_refused_by_name(call):
    """The meta device (shapes without values) stands in for data on a device this process
    cannot read; it used to end in "Tensor.item() cannot be called on meta tensors"."""
    model = bl.RBM(n_visible=4, n_hidden=3, generator=0)
    with pytest.raises(ValidationError, match="on the 'meta' device, which holds shapes but no values"):
        call(model, torch.zeros(5, 4, device="meta"))


@pytest.mark.parametrize("sampler", ["pt", "st", "ast", "cast", "tt"])
def test_samplers_keep_the_checked_flag_so_the_check_runs_once(monkeypatch, sampler):
    """The 0/1 check costs a synchronisation per call: samplers that rebuild their chains every
    step (swaps, level moves, accept-or-keep) carry ``values_checked`` on, so a run checks its
    chains at most once, not every sweep (about 60 µs a step on a tiny model)."""
    calls = []
    original = bl.operators.base.check_binary_layers
    monkeypatch.setattr(
        bl.operators.base, "check_binary_layers", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    model = bl.RBM(n_visible=4, n_hidden=3, generator=0)
    bl.sample(model, sampler=sampler, n_levels=4, n_chains=6, n_sweeps=50, generator=1)
    assert len(calls) <= 1


def test_tempered_estimators_check_their_chains_once_per_run(monkeypatch):
    calls = []
    original = bl.operators.base.check_binary_layers
    monkeypatch.setattr(
        bl.operators.base, "check_binary_layers", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    model = bl.RBM(n_visible=4, n_hidden=3, generator=0)
    bl.estimate_log_z(model, method="rts", n_chains=10, n_temperatures=8, n_sweeps=100, generator=2)
    assert 1 <= len(calls) <= 4  # once per fresh start (the pilot, the runs), never per sweep

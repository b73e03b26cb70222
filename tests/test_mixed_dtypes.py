"""Mixed dtypes and devices at every public door that takes a model with chains or data.

The walk is generated from the registries (operators, samplers, tempering schemes, log Z
methods, training algorithms), so a newly registered one is walked without editing this file.
The rule at every door:

* **data** (0/1 rows, or real rows for a Gaussian visible layer) of another dtype is converted
  to the model's dtype; the values convert exactly, so the result must be *identical* to the
  one computed from data already in the model's dtype (same seed);
* **chains** (``Chains``, a tempering scheme's state, a tempered run's ``start``) of another
  dtype or device are refused with one ``ValidationError`` naming both dtypes and devices and
  the fix, and the fix the message gives must work. Converting chains silently would hide a slip.

A door that refuses a model whatever the data's dtype (RAISE on a DBM, say) must refuse it with
the same message when the dtypes differ. Devices are exercised with chains on PyTorch's
``meta`` device, which goes through the same check as any other device. Data on another device
goes through the same ``as_model_data`` copy as data of another dtype (``.to(dtype=…,
device=…)``), but a ``meta`` tensor holds no values to check, so the data-device walk runs
only where CUDA is present.
"""

from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

import boltzlab as bl
from boltzlab import sampling
from boltzlab.chains import Chains
from boltzlab.errors import BoltzlabError, ValidationError
from boltzlab.estimators import collect_tempered_samples, methods, raise_log_likelihood
from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood, exact_log_likelihood
from boltzlab.estimators.tempered.samples import SamplerState
from boltzlab.evaluation import log_unnormalized
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.models.mean_field import mean_field_posterior
from boltzlab.models.toy import GaussianMixtureFamily
from boltzlab.models.trajectory import Trajectory
from boltzlab.tempering.registry import schemes
from boltzlab.training import available_phases

# (model dtype, the other dtype): the common slip (float64 from numpy, float32 model) and back.
MISMATCHES = [(torch.float32, torch.float64), (torch.float64, torch.float32)]
N_VISIBLE, N_HIDDEN, N_CHAINS, N_ROWS = 7, 3, 13, 11
# Operators that move only continuous models; every other operator is walked on an RBM.
CONTINUOUS_OPERATORS = {"hmc"}
# Small settings so the walk stays fast; a method, scheme or algorithm missing here is walked
# with its defaults (slower, but walked).
ESTIMATOR_OPTIONS: dict[str, dict[str, Any]] = {
    "ais": {"n_chains": 8, "n_temperatures": 20},
    "anchored-ais": {"n_chains": 8, "n_temperatures": 20, "anchor_chains": 8, "anchor_sweeps": 5},
    "mbar": {"n_chains": 6, "n_temperatures": 5, "n_sweeps": 40, "initial_sweeps": 5, "n_groups": 3},
    "raise": {"n_chains": 2, "n_temperatures": 10},
    "rts": {"n_chains": 6, "n_temperatures": 5, "n_sweeps": 40, "initial_sweeps": 5},
    "ts": {"n_chains": 6, "n_temperatures": 5, "n_sweeps": 40, "initial_sweeps": 5},
    "ti": {"n_chains": 6, "n_temperatures": 5, "n_sweeps": 40, "initial_sweeps": 5},
    "ti-rb": {"n_chains": 6, "n_temperatures": 5, "n_sweeps": 40, "initial_sweeps": 5},
    "trajectory-ais": {"n_chains": 8, "n_steps_per_segment": 3, "pilot_chains": 4},
}
TRAIN_OPTIONS: dict[str, dict[str, Any]] = {
    "cd": {},
    "cast": {"n_chains": 4},
    "ast": {"n_chains": 4},
}
DEFAULT_TRAIN_OPTIONS = {"n_chains": 5}


# ---------------------------------------------------------------------------- models and inputs
def make_model(kind: str, dtype: torch.dtype) -> Any:
    """A tiny model of ``kind`` in ``dtype``; the same parameters (up to rounding) every call."""
    if kind == "rbm":
        return bl.RBM(n_visible=N_VISIBLE, n_hidden=N_HIDDEN, generator=0, weight_std=0.5, dtype=dtype)
    if kind == "dbm":
        return bl.DBM(layer_sizes=[N_VISIBLE, N_HIDDEN, 2], generator=0, dtype=dtype)
    if kind == "gaussian-rbm":
        return GaussianRBM(n_visible=N_VISIBLE, n_hidden=N_HIDDEN, generator=0, dtype=dtype)
    if kind == "toy":
        return GaussianMixtureFamily(dimension=3, dtype=dtype)
    raise AssertionError(kind)


MODEL_KINDS = ("rbm", "dbm", "gaussian-rbm")


def make_data(kind: str, dtype: torch.dtype) -> Tensor:
    """Rows for ``kind`` whose values every float dtype holds exactly (0/1, or float32 reals)."""
    generator = torch.Generator().manual_seed(1)
    if kind == "gaussian-rbm":
        return torch.randn(N_ROWS, N_VISIBLE, generator=generator).to(torch.float32).to(dtype)
    return torch.randint(0, 2, (N_ROWS, N_VISIBLE), generator=generator).to(dtype)


def make_trajectory(model: bl.RBM, dtype: torch.dtype) -> Trajectory:
    """Two snapshots on the way to ``model``, stored in ``dtype``."""
    snapshots = [bl.RBM(weights=scale * model.weights.detach()) for scale in (0.3, 0.6)]
    return Trajectory.from_models(snapshots).to(dtype=dtype)


def foreign(chains: Chains, other: torch.dtype | str) -> Chains:
    """``chains`` of another dtype (a ``torch.dtype``) or on another device (a device name)."""
    return chains.to(dtype=other) if isinstance(other, torch.dtype) else chains.to(device=other)


def map_tensors(value: Any, function: Callable[[Tensor], Tensor]) -> Any:
    """``value`` with ``function`` applied to every tensor inside it (dataclasses, tuples, dicts)."""
    if isinstance(value, Tensor):
        return function(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {
            field.name: map_tensors(getattr(value, field.name), function)
            for field in dataclasses.fields(value)
            if field.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, (tuple, list)):
        return type(value)(map_tensors(item, function) for item in value)
    if isinstance(value, dict):
        return {key: map_tensors(item, function) for key, item in value.items()}
    return value


# ---------------------------------------------------------------------------- the two rules
def assert_refused_naming_both(call: Callable[[], Any], model: Any, other: torch.dtype | str) -> str:
    """``call()`` raises one ValidationError naming the model's dtype and device, the other
    side's dtype or device, and a fix; returns the message."""
    with pytest.raises(BoltzlabError) as caught:
        call()
    assert isinstance(caught.value, ValidationError), type(caught.value)
    message = str(caught.value)
    device = torch.device(model.device).type
    assert f"but the model is {model.dtype} on {device}" in message, message
    if isinstance(other, torch.dtype):
        assert re.search(rf"are [^:]*{re.escape(str(other))}[^:]* on {device}", message), message
    else:
        assert re.search(rf"are {re.escape(str(model.dtype))} on {other}\b", message), message
    assert any(fix in message for fix in ("chains.to(", "state_from_tensors(", "SamplerState(chains=")), (
        message
    )
    return message


# Fields that differ between two identical runs: wall-clock time.
UNCOMPARED_FIELDS = {"time", "seconds", "elapsed", "wall_seconds"}


def same(left: Any, right: Any, path: str = "result") -> None:
    """``left`` and ``right`` equal: tensors (dtype, device and values, NaN = NaN), arrays,
    floats, dataclasses, tuples, dicts and modules, recursively."""
    if isinstance(left, Tensor):
        assert isinstance(right, Tensor), path
        assert left.dtype == right.dtype and left.device == right.device, (
            f"{path}: {left.dtype} vs {right.dtype}"
        )
        assert torch.equal(left.cpu(), right.cpu()) or (
            torch.equal(left.isnan(), right.isnan()) and torch.equal(left.nan_to_num(), right.nan_to_num())
        ), path
    elif isinstance(left, np.ndarray):
        np.testing.assert_array_equal(left, right, err_msg=path)
    elif isinstance(left, float):
        assert left == right or (math.isnan(left) and math.isnan(right)), f"{path}: {left} vs {right}"
    elif dataclasses.is_dataclass(left) and not isinstance(left, type):
        assert type(left) is type(right), path
        for field in dataclasses.fields(left):
            if field.name not in UNCOMPARED_FIELDS:
                same(getattr(left, field.name), getattr(right, field.name), f"{path}.{field.name}")
    elif isinstance(left, (tuple, list)):
        assert len(left) == len(right), path
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            same(a, b, f"{path}[{index}]")
    elif isinstance(left, dict):
        assert left.keys() == right.keys(), path
        for key in left:
            same(left[key], right[key], f"{path}[{key!r}]")
    elif isinstance(left, torch.nn.Module):
        same(left.state_dict(), right.state_dict(), path)
    else:
        assert left == right, f"{path}: {left!r} vs {right!r}"


def assert_data_converted(
    call: Callable[[Any, Tensor], Any], kind: str, dtype: torch.dtype, other: torch.dtype
):
    """``call(model, data)`` gives with data of ``other`` dtype exactly what it gives with data in
    the model's dtype (a fresh model each time), or the same refusal; returns the result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny settings: the estimators' verdicts warn
        try:
            expected = call(make_model(kind, dtype), make_data(kind, dtype))
        except BoltzlabError as refusal:  # this door does not take this model: the same refusal
            with pytest.raises(type(refusal)) as caught:
                call(make_model(kind, dtype), make_data(kind, other))
            assert str(caught.value) == str(refusal)
            return None
        result = call(make_model(kind, dtype), make_data(kind, other))
    same(result, expected)
    return result


def chains_in(value: Any) -> list[Chains]:
    """Every ``Chains`` inside a result (dataclass fields, tuples), to check their dtype."""
    if isinstance(value, Chains):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [c for field in dataclasses.fields(value) for c in chains_in(getattr(value, field.name))]
    if isinstance(value, (tuple, list)):
        return [c for item in value for c in chains_in(item)]
    return []


def generator() -> torch.Generator:
    return torch.Generator().manual_seed(0)


FOREIGN = [pytest.param(other, id=str(other).removeprefix("torch.")) for _, other in MISMATCHES[:1]] + [
    pytest.param("meta", id="meta-device")
]


# ---------------------------------------------------------------------------- operators, iterate, sample
def operator_model(name: str, dtype: torch.dtype) -> Any:
    return make_model("toy" if name in CONTINUOUS_OPERATORS else "rbm", dtype)


@pytest.mark.parametrize("other", FOREIGN)
@pytest.mark.parametrize("name", bl.operators.available())
def test_operator_step_refuses_foreign_chains(name, other):
    model = operator_model(name, torch.float32)
    operator = bl.operators.get(name)
    chains = model.init_chains(N_CHAINS, generator=0).with_beta(1.0)
    assert_refused_naming_both(
        lambda: operator.step(model, foreign(chains, other), generator=generator()), model, other
    )
    if isinstance(other, torch.dtype):  # the fix the message gives (a meta tensor holds no values)
        fixed, _ = operator.step(model, foreign(chains, other).to(dtype=model.dtype), generator=generator())
        assert fixed.dtype == model.dtype


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
@pytest.mark.parametrize("name", bl.operators.available())
def test_iterate_refuses_chains_of_another_dtype(name, dtype, other):
    model = operator_model(name, dtype)
    chains = model.init_chains(N_CHAINS, generator=0).with_beta(1.0)
    operator = bl.operators.get(name)
    steps = sampling.iterate(model, operator, foreign(chains, other), generator=generator(), n_sweeps=2)
    assert_refused_naming_both(lambda: list(steps), model, other)
    ((last, _),) = list(sampling.iterate(model, operator, chains, generator=generator(), n_sweeps=1))
    assert last.dtype == dtype


def scheme_options(name: str, model: Any) -> dict[str, Any]:
    """What the scheme ``name`` needs besides an operator (ptt: a trajectory of an RBM)."""
    if name == "ptt" and isinstance(model, bl.RBM):
        return {"trajectory": make_trajectory(model, model.dtype)}
    return {}


PLAIN_SAMPLERS = [name for name in sampling.samplers() if name not in schemes()]


@pytest.mark.parametrize("other", FOREIGN)
@pytest.mark.parametrize("name", bl.operators.available())
@pytest.mark.parametrize("sampler", PLAIN_SAMPLERS)
def test_plain_sample_refuses_foreign_chains(sampler, name, other):
    model = operator_model(name, torch.float32)
    chains = model.init_chains(N_CHAINS, generator=0)
    call = lambda: bl.sample(  # noqa: E731
        model,
        sampler=sampler,
        operator=name,
        n_chains=N_CHAINS,
        n_sweeps=2,
        generator=0,
        init=foreign(chains, other),
    )
    assert_refused_naming_both(call, model, other)


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("sampler", sampling.samplers())
def test_sample_converts_data(sampler, kind, dtype, other):
    # The plain sampler starts at rows of init= data; a tempering scheme starts its own chains
    # and refuses init= whatever its dtype, with the same message.
    def call(model, data):
        options = scheme_options(sampler, model)
        return bl.sample(
            model,
            sampler=sampler,
            n_chains=N_CHAINS,
            n_sweeps=3,
            generator=0,
            init=data,
            keep_every=1,
            **options,
        )

    result = assert_data_converted(call, kind, dtype, other)
    if result is not None:
        assert result.chains.dtype == dtype and result.samples.dtype == dtype


# ---------------------------------------------------------------------------- tempering schemes
def scheme_for(name: str, model: Any) -> Any:
    return sampling.make_scheme(name, "gibbs", **scheme_options(name, model))


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
@pytest.mark.parametrize("name", schemes())
def test_scheme_refuses_a_state_of_another_dtype(name, dtype, other):
    # A state made for a model of another dtype (make_scheme / run_scheme(state=...) callers).
    model = make_model("rbm", dtype)
    scheme = scheme_for(name, model)
    state = scheme.init(make_model("rbm", other), N_CHAINS, generator=generator())

    def call():
        return sampling.run_scheme(
            model, scheme, n_chains=N_CHAINS, n_sweeps=2, generator=generator(), state=state
        )

    assert_refused_naming_both(call, model, other)
    # The fix the message gives: rebuild the state for this model.
    fixed = scheme.state_from_tensors(model, scheme.state_tensors(state))
    result = sampling.run_scheme(
        model, scheme, n_chains=N_CHAINS, n_sweeps=2, generator=generator(), state=fixed
    )
    assert result.chains.dtype == dtype


@pytest.mark.parametrize("name", schemes())
def test_scheme_refuses_a_state_on_another_device(name):
    model = make_model("rbm", torch.float32)
    scheme = scheme_for(name, model)
    state = map_tensors(scheme.init(model, N_CHAINS, generator=generator()), lambda t: t.to("meta"))
    call = lambda: scheme.step(model, state, generator=generator())  # noqa: E731
    assert_refused_naming_both(call, model, "meta")


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
def test_ptt_converts_a_trajectory_of_another_dtype(dtype, other):
    model = make_model("rbm", dtype)
    results = [
        bl.sample(
            model,
            sampler="ptt",
            trajectory=make_trajectory(model, stored),
            n_chains=N_CHAINS,
            n_sweeps=3,
            generator=0,
        )
        for stored in (dtype, other)
    ]
    assert results[1].chains.dtype == dtype
    if other == torch.float64:  # float32 snapshots widen exactly; narrowed float64 ones round
        same(results[1].chains, results[0].chains)


# ---------------------------------------------------------------------------- log Z estimators
DATA_OPTIONS: dict[str, Callable[[Any, Tensor], dict[str, Any]]] = {
    "raise": lambda model, data: {"data": data},
    "anchored-ais": lambda model, data: {"anchor_data": data},
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("method", methods())
def test_estimate_log_z_converts_data(method, kind):
    # check_data (where the verdict's lower-bound witness starts) for every method, plus the
    # method's own data argument; data of the other dtype must give the identical estimate.
    dtype, other = MISMATCHES[0]

    def call(model, data):
        options = {
            **ESTIMATOR_OPTIONS.get(method, {}),
            **DATA_OPTIONS.get(method, lambda m, d: {})(model, data),
        }
        if method == "trajectory-ais" and isinstance(model, bl.RBM):
            options["trajectory"] = make_trajectory(model, model.dtype)
        return bl.estimate_log_z(
            model, method=method, generator=0, check_data=data, lower_bound_sweeps=3, **options
        )

    estimate = assert_data_converted(call, kind, dtype, other)
    if estimate is not None:
        assert math.isfinite(estimate.log_z)
        assert all(chains.dtype == dtype for chains in chains_in(estimate.info))


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
def test_trajectory_ais_converts_a_trajectory_of_another_dtype(dtype, other):
    model = make_model("rbm", dtype)
    estimate = bl.estimate_log_z(
        model,
        method="trajectory-ais",
        trajectory=make_trajectory(model, other),
        generator=0,
        lower_bound_sweeps=0,
        **ESTIMATOR_OPTIONS["trajectory-ais"],
    )
    assert math.isfinite(estimate.log_z)


@pytest.mark.parametrize("other", FOREIGN)
def test_tempered_run_refuses_a_foreign_start(other):
    # collect_tempered_samples (under rts, ts, ti, ti-rb, mbar) continues from a final_state.
    model = make_model("rbm", torch.float32)
    options = {
        "n_chains": 4,
        "n_temperatures": 5,
        "n_sweeps": 10,
        "initial_sweeps": 2,
        "n_initial_iterations": 1,
    }
    start = collect_tempered_samples(model, generator=0, **options).final_state
    moved = SamplerState(chains=foreign(start.chains, other), levels=start.levels)
    message = assert_refused_naming_both(
        lambda: collect_tempered_samples(model, generator=0, start=moved, **options), model, other
    )
    assert "start chains" in message
    if isinstance(other, torch.dtype):  # the fix the message gives (a meta tensor holds no values)
        fixed = SamplerState(chains=moved.chains.to(dtype=model.dtype), levels=start.levels)
        final = collect_tempered_samples(model, generator=0, start=fixed, **options).final_state
        assert final.chains.dtype == model.dtype


# ---------------------------------------------------------------------------- per-example evaluation
EVALUATIONS: dict[str, Callable[[Any, Tensor], Any]] = {
    "log_likelihood": lambda model, data: bl.log_likelihood(model, data, 0.0),
    "log_unnormalized": log_unnormalized,
    "variational_lower_bound": lambda model, data: bl.variational_lower_bound(model, data, 0.0),
    "mean_field_posterior": lambda model, data: mean_field_posterior(model, data),
    "dbm estimate_log_likelihood": lambda model, data: estimate_log_likelihood(
        model, data[:3], log_z=0.0, n_chains=2, n_temperatures=5, generator=0
    ),
    "dbm exact_log_likelihood": lambda model, data: exact_log_likelihood(model, data, log_z=0.0),
    "raise_log_likelihood": lambda model, data: raise_log_likelihood(
        model, data, n_chains=2, n_temperatures=5, generator=0
    ),
    "set_base_rate": lambda model, data: model.set_base_rate(data),
    "chains_from": lambda model, data: model.chains_from(data, generator=0),
}


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("name", EVALUATIONS)
def test_evaluation_converts_data(name, kind, dtype, other):
    result = assert_data_converted(EVALUATIONS[name], kind, dtype, other)
    assert all(chains.dtype == dtype for chains in chains_in(result))


# ---------------------------------------------------------------------------- training
def train_call(algorithm: str, **extra: Any) -> Callable[[Any, Tensor], Any]:
    def call(model, data):
        options = TRAIN_OPTIONS.get(algorithm, DEFAULT_TRAIN_OPTIONS)
        return bl.train(
            model,
            data,
            algorithm=algorithm,
            n_updates=3,
            batch_size=4,
            generator=0,
            validation_data=data,
            **options,
            **extra,
        )

    return call


@pytest.mark.parametrize("kind", MODEL_KINDS)
@pytest.mark.parametrize("algorithm", available_phases())
def test_train_converts_data(algorithm, kind):
    dtype, other = MISMATCHES[0]
    extra = {"track_exact_every": 1} if kind == "rbm" else {}
    result = assert_data_converted(train_call(algorithm, **extra), kind, dtype, other)
    if result is not None:
        assert all(parameter.dtype == dtype for parameter in result.model.parameters())
        assert result.final_chains is None or result.final_chains.dtype == dtype


@pytest.mark.parametrize(("dtype", "other"), MISMATCHES)
@pytest.mark.parametrize("algorithm", available_phases())
def test_train_resumes_a_checkpoint_of_another_dtype(algorithm, dtype, other, tmp_path):
    # The checkpoint (persistent chains, tempering state, optimiser state) was written by a run
    # of the other dtype; resuming reads it back in the model's dtype.
    data = make_data("rbm", other)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = train_call(algorithm, checkpoint_dir=tmp_path, checkpoint_every=1)(
            make_model("rbm", other), data
        )
        result = bl.train(
            make_model("rbm", dtype),
            data,
            algorithm=algorithm,
            n_updates=5,
            batch_size=4,
            generator=0,
            checkpoint_dir=tmp_path,
            resume=True,
            **TRAIN_OPTIONS.get(algorithm, DEFAULT_TRAIN_OPTIONS),
        )
    assert result.n_updates == 5
    same(result.history[: len(first.history)], first.history, "history")  # resumed, not restarted
    assert all(parameter.dtype == dtype for parameter in result.model.parameters())
    assert result.final_chains is None or result.final_chains.dtype == dtype


# ---------------------------------------------------------------------------- another real device
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device for data on another device")
@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_data_on_another_device_is_moved(kind):
    def walk(model, data):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (
                bl.sample(model, n_chains=N_CHAINS, n_sweeps=2, generator=0, init=data),
                bl.log_likelihood(model, data, 0.0),
                bl.estimate_log_z(
                    model, method="ais", generator=0, check_data=data, **ESTIMATOR_OPTIONS["ais"]
                ),
                bl.train(model, data, n_updates=2, batch_size=4, generator=0).model,
            )

    data = make_data(kind, torch.float32)
    same(walk(make_model(kind, torch.float32), data.cuda()), walk(make_model(kind, torch.float32), data))
    model = make_model(kind, torch.float32)
    chains = model.init_chains(N_CHAINS, generator=0)
    assert_refused_naming_both(
        lambda: bl.sample(model, n_chains=N_CHAINS, n_sweeps=2, generator=0, init=chains.to(device="cuda")),
        model,
        "cuda",
    )

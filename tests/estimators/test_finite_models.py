"""A model holding NaN or ±inf is refused at every public door; no non-finite log Z is trusted.

Issue: one NaN weight made ``estimate_log_z(model, "exact")`` return ``nan, reliable=True``.
"""

from __future__ import annotations

import math

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.exact import exact_log_z
from boltzlab.estimators.record import methods
from boltzlab.models.gaussian_rbm import GaussianRBM

pytestmark = pytest.mark.fault("broken models")


def _models() -> list[tuple[str, object, str]]:
    """(label, model, name of the tensor that will be broken)."""
    return [
        ("rbm", bl.RBM(n_visible=7, n_hidden=3, generator=0), "weights"),
        ("dbm", bl.DBM(layer_sizes=[6, 3, 2], generator=0), "weights.0"),
        ("gaussian-rbm", GaussianRBM(n_visible=4, n_hidden=3, generator=0), "hidden_bias"),
    ]


def _break(model: torch.nn.Module, name: str, value: float) -> None:
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    assert name in tensors, sorted(tensors)
    with torch.no_grad():
        tensors[name].view(-1)[0] = value


@pytest.mark.parametrize(("label", "model", "name"), _models(), ids=[m[0] for m in _models()])
def test_a_sound_model_passes_every_door(label: str, model: object, name: str) -> None:
    assert math.isfinite(bl.estimate_log_z(model, "exact").log_z)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("label", "model", "name"), _models(), ids=[m[0] for m in _models()])
def test_every_door_refuses_a_broken_model_and_names_the_tensor(
    label: str, model: object, name: str, value: float
) -> None:
    _break(model, name, value)
    data = torch.zeros(2, model.layer_sizes[0])
    doors = {
        "estimate_log_z": lambda: bl.estimate_log_z(model, "exact"),
        "exact_log_z": lambda: exact_log_z(model),
        "sample": lambda: bl.sample(model, n_chains=2, n_sweeps=1, generator=0),
        "log_likelihood": lambda: bl.log_likelihood(model, data, 0.0),
    }
    for door, call in doors.items():
        with pytest.raises(ValidationError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(f"{door}:"), message
        assert repr(name) in message and "earlier checkpoint" in message, message


@pytest.mark.parametrize("method", [m for m in methods() if m != "exact"])
def test_every_estimator_refuses_a_nan_rbm_before_running(method: str) -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    _break(model, "visible_bias", math.nan)
    with pytest.raises(ValidationError, match="'visible_bias' holds 1 non-finite value"):
        bl.estimate_log_z(model, method, generator=0, check_data=torch.zeros(3, 7))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_log_z_is_never_reliable(value: float) -> None:
    estimate = bl.LogZEstimate(log_z=value, stderr=0.0, method="exact")
    assert not estimate.reliable and estimate.status == "unreliable"
    assert "not finite" in estimate.warnings[0] and "not finite" in estimate.verdict


def test_log_likelihood_refuses_a_non_finite_log_z() -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    with pytest.raises(ValidationError, match="log_z must be a finite number"):
        bl.log_likelihood(model, torch.zeros(2, 7), math.nan)

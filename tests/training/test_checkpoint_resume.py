"""Checkpoints: an interrupted, resumed run is bit-identical to the uninterrupted one, and a
diverging run stops with a clear message and keeps its last good checkpoint.

Properties checked:
* a run of 40 updates interrupted after update 23 (newest checkpoint: update 20), resumed
  with new Python objects (model, generator), ends with torch.equal parameters, momentum
  buffers and chains, the same history (times aside) and the same metrics CSV, for CD and PCD,
  with momentum and non-constant learning-rate schedules;
* a huge learning rate with momentum raises DivergenceError naming the update, the learning rate
  and the non-finite tensors; large but finite weights are no divergence; no
  checkpoint holds non-finite values and the last one loads;
* a fresh run refuses a directory with another run's checkpoints; a resume may lower the
  learning rate; a resume on other data is refused.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import DivergenceError, ValidationError
from boltzlab.io import load_checkpoint
from boltzlab.training import Callback, EarlyStopping, find_latest_checkpoint, train


class Interrupted(Exception):
    """Stands in for a killed process."""


class InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise Interrupted


def _data() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    prototypes = (torch.rand(3, 9, generator=g) < 0.5).float()
    noise = (torch.rand(37, 9, generator=g) < 0.1).float()
    return (prototypes[torch.arange(37) % 3] + noise) % 2  # 37 noisy copies of 3 patterns


SETTINGS = {
    "cd": {"algorithm": "cd", "operator": "flip", "k": 2, "lr_schedule": "inverse"},
    "pcd": {
        "algorithm": "pcd",
        "operator": "mixture",
        "operator_params": {"alpha": 0.5},
        "lr_schedule": "linear",
    },
}


def _run(directory: Path, algorithm: str, *, seed_model: int, seed: int, **extra):
    model = bl.RBM(n_visible=9, n_hidden=4, generator=seed_model)
    return train(
        model,
        _data(),
        n_chains=13,
        batch_size=8,  # 37 examples: 4 batches per epoch, so 40 updates cross 10 epochs
        n_updates=40,
        learning_rate=0.1,
        momentum=0.9,
        weight_decay=1e-3,
        log_every=5,
        track_exact_every=10,
        validation_data=_data()[:6],
        checkpoint_dir=directory / "checkpoints",
        checkpoint_every=10,
        metrics_path=directory / "metrics.csv",
        generator=seed,
        callbacks=[EarlyStopping(patience=100), *extra.pop("callbacks", [])],
        **SETTINGS[algorithm],
        **extra,
    )


def _csv_without_time(path: Path) -> list[dict[str, str]]:
    with path.open() as stream:
        return [{k: v for k, v in row.items() if k != "time"} for row in csv.DictReader(stream)]


@pytest.mark.fault("interrupted runs")
@pytest.mark.parametrize("algorithm", ["cd", "pcd"])
def test_resume_is_bit_identical(tmp_path: Path, algorithm: str) -> None:
    whole = _run(tmp_path / "whole", algorithm, seed_model=0, seed=123)

    with pytest.raises(Interrupted):
        _run(tmp_path / "parts", algorithm, seed_model=0, seed=123, callbacks=[InterruptAt(23)])
    latest = find_latest_checkpoint(tmp_path / "parts" / "checkpoints")
    assert latest is not None and latest.name == "checkpoint-000000020.safetensors"
    # New objects: another initial model and another seed; everything comes from the checkpoint.
    resumed = _run(tmp_path / "parts", algorithm, seed_model=99, seed=999, resume=True)

    assert resumed.n_updates == whole.n_updates == 40
    for name, parameter in whole.model.named_parameters():
        assert torch.equal(parameter, dict(resumed.model.named_parameters())[name]), name
    assert torch.equal(whole.model.base_logits, resumed.model.base_logits)
    for a, b in zip(whole.final_chains.layers, resumed.final_chains.layers, strict=True):
        assert torch.equal(a, b)
    final_whole = load_checkpoint(find_latest_checkpoint(tmp_path / "whole" / "checkpoints"))
    final_parts = load_checkpoint(find_latest_checkpoint(tmp_path / "parts" / "checkpoints"))
    assert final_whole.metadata["update"] == final_parts.metadata["update"] == 40
    for name, tensor in final_whole.tensors.items():
        assert torch.equal(tensor, final_parts.tensors[name]), name  # momentum buffers, generator
    strip = [{**r.to_dict(), "time": None} for r in whole.history]
    assert [{**r.to_dict(), "time": None} for r in resumed.history] == strip
    assert [r.update for r in whole.history] == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    assert _csv_without_time(tmp_path / "whole" / "metrics.csv") == _csv_without_time(
        tmp_path / "parts" / "metrics.csv"
    )
    assert resumed.run_dir == tmp_path / "parts" / "checkpoints"


def test_divergence_stops_and_keeps_last_good_checkpoint(tmp_path: Path) -> None:
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    with pytest.raises(DivergenceError) as caught:
        train(
            model,
            _data(),
            algorithm="pcd",
            n_chains=13,
            batch_size=8,
            n_updates=50,
            # Momentum piles steps of ~1e38 up past float32's 3.4e38 at update 3. (Without it the
            # weights saturate at ~lr and stay finite, which is no divergence.)
            learning_rate=3e38,
            momentum=0.9,
            log_every=10,
            checkpoint_dir=tmp_path,
            checkpoint_every=1,
            generator=0,
        )
    message = str(caught.value)
    assert "\n" not in message
    assert "at update 3 (learning rate 3e+38; NaN or ±inf now in 'weights', 'hidden_bias')" in message
    assert "learning_rate" in message and "--learning-rate" in message
    last = find_latest_checkpoint(tmp_path)
    assert last is not None and last.name == "checkpoint-000000002.safetensors"
    assert str(last) in message
    assert caught.value.step == 3
    checkpoint = load_checkpoint(last)
    assert checkpoint.metadata["update"] == 2
    for name, tensor in checkpoint.tensors.items():
        if tensor.is_floating_point():
            assert bool(torch.isfinite(tensor).all()), name


def test_divergence_found_between_records_reports_the_exact_update() -> None:
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    with pytest.raises(DivergenceError, match=r"at update 3 .*no checkpoint was written"):
        train(
            model,
            _data(),
            batch_size=8,
            n_updates=30,
            learning_rate=3e38,
            momentum=0.9,
            log_every=10,
            generator=0,
        )


def test_large_but_finite_weights_are_no_divergence() -> None:
    """Weights of ~1e38 are finite: a check that summed them overflowed to inf and stopped a run
    whose every parameter was finite ("non-finite at update 2")."""
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    train(model, _data(), batch_size=8, n_updates=30, learning_rate=1e38, log_every=10, generator=0)
    assert all(bool(tensor.isfinite().all()) for tensor in model.parameters())
    assert float(model.weights.abs().max()) > 1e37


def test_fresh_run_refuses_a_used_directory(tmp_path: Path) -> None:
    data = _data()
    train(
        bl.RBM(n_visible=9, n_hidden=4, generator=0), data, batch_size=8, n_updates=3, checkpoint_dir=tmp_path
    )
    with pytest.raises(ValidationError, match="already holds checkpoints"):
        train(
            bl.RBM(n_visible=9, n_hidden=4, generator=0),
            data,
            batch_size=8,
            n_updates=3,
            checkpoint_dir=tmp_path,
        )


def test_resume_with_lower_learning_rate_and_refusals(tmp_path: Path) -> None:
    data = _data()

    def run(**settings):
        base = {"batch_size": 8, "n_updates": 6, "checkpoint_dir": tmp_path, "generator": 0, "log_every": 2}
        return train(bl.RBM(n_visible=9, n_hidden=4, generator=0), **{"data": data, **base, **settings})

    run(learning_rate=0.1, n_updates=4)
    resumed = run(learning_rate=0.01, momentum=0.5, resume=True)
    assert [r.learning_rate for r in resumed.history] == [0.1, 0.1, 0.1, 0.01]
    assert resumed.history[-1].update == 6
    with pytest.raises(ValidationError, match=r"settings differ .*batch_size: checkpoint 8, now 4"):
        run(batch_size=4, n_updates=8, resume=True)
    with pytest.raises(ValidationError, match="the training data differ"):
        run(data=data.flip(0), n_updates=8, resume=True)

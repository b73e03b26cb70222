"""The real-valued front end: pixel standardisation, the two-stage pipeline's tiny configuration
(AIS against exact log Z in both stages, the Gaussian-binary RBM beating independent Gaussians
on two-prototype images by many standard errors), and ``boltzlab reproduce front-end``."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab_experiments.front_end.config import FrontEndConfig
from boltzlab_experiments.front_end.pixels import Standardizer
from boltzlab_experiments.front_end.run import run_front_end

Z_LIMIT = 4.0  # |z| above this has probability < 1e-4 for one Gaussian statistic


def two_prototype_images(n: int, seed: int) -> torch.Tensor:
    """uint8 images (n, 28, 28): one of two fixed binary prototypes (40/200 grey) plus noise."""
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.rand(2, 28, 28, generator=torch.Generator().manual_seed(99)) < 0.5
    label = torch.rand(n, generator=g) < 0.4
    base = torch.where(label[:, None, None], prototypes[0], prototypes[1]).float() * 160 + 40
    noisy = base + 30 * torch.randn(n, 28, 28, generator=g)
    return noisy.clamp(0, 255).to(torch.uint8)


def test_standardizer_pools_drops_constant_pixels_and_standardises():
    g = torch.Generator().manual_seed(0)
    images = torch.rand(30, 12, 12, generator=g, dtype=torch.float64)
    images[:, :4, :4] = 0.25  # the top-left 2×2 pooled block is constant: dropped
    standardizer = Standardizer.fit(images, downsample=2, min_pixel_std=0.01)
    assert standardizer.image_shape == (6, 6)
    kept = standardizer.kept.reshape(6, 6)
    assert not bool(kept[:2, :2].any()) and int(kept.sum()) == 32 == standardizer.n_visible
    v = standardizer.transform(images, dtype=torch.float64)
    pooled = F.avg_pool2d(images[:, None], 2).reshape(30, 36)[:, standardizer.kept]
    torch.testing.assert_close(v, (pooled - pooled.mean(0)) / pooled.std(0, unbiased=False))
    torch.testing.assert_close(v.mean(0), torch.zeros(32, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(v.std(0, unbiased=False), torch.ones(32, dtype=torch.float64))
    # uint8 grey levels are read as level/255; flattened square images are accepted.
    as_bytes = (images * 255).round().to(torch.uint8)
    from_bytes = standardizer.transform(as_bytes.reshape(30, 144), dtype=torch.float64)
    # Rounding moves each grey level by at most 0.5/255, so a pooled pixel too; then ÷ std.
    bound = (0.5 / 255) / standardizer.std
    assert bool(((from_bytes - v).abs() <= bound + 1e-12).all())
    restored = standardizer.inverse(v).reshape(30, 36)[:, standardizer.kept]
    torch.testing.assert_close(restored, pooled)
    assert standardizer.log_jacobian == pytest.approx(-float(torch.log(standardizer.std).sum()))
    with pytest.raises(ValidationError, match="min_pixel_std"):
        Standardizer.fit(torch.zeros(5, 4, 4), downsample=2)
    with pytest.raises(ValidationError, match="divide"):
        Standardizer.fit(images, downsample=5)


def test_config_validates():
    tiny = FrontEndConfig.tiny()
    with pytest.raises(ValidationError, match="code_mode"):
        replace(tiny, code_mode="mean")
    with pytest.raises(ValidationError, match="dbm_hidden"):
        replace(tiny, dbm_hidden=(5,))
    with pytest.raises(ValidationError, match="gaussian_lr_schedule"):
        replace(tiny, gaussian_lr_schedule="cosine")
    with pytest.raises(ValidationError, match="gaussian_algorithm"):
        replace(tiny, gaussian_algorithm="pt")
    with pytest.raises(ValidationError, match="config must be"):
        run_front_end({"n_hidden": 3}, np.zeros((4, 4, 4)), np.zeros((4, 4, 4)))


def test_tiny_pipeline_agrees_with_exact_and_beats_independent_units():
    """Both stages: AIS within Z_LIMIT standard errors of the exact log Z; stage 1's exact
    per-example log-likelihood beats the independent Gaussian by Z_LIMIT paired standard errors;
    the reported numbers are the model's; the same seed gives the same run."""
    config = FrontEndConfig.tiny()
    train_images, test_images = two_prototype_images(200, 1), two_prototype_images(50, 2)
    result = run_front_end(config, train_images, test_images)
    model, dbm = result.gaussian_model, result.dbm_model
    assert model.layer_sizes == (result.standardizer.n_visible, config.n_hidden)
    assert dbm.layer_sizes == config.dbm_layer_sizes
    for report, exact in (
        (result.gaussian_log_z, bl.exact_log_z(model)),
        (result.dbm_log_z, bl.exact_log_z(dbm)),
    ):
        assert report.exact == pytest.approx(exact, abs=1e-9)
        assert abs(report.z_score) < Z_LIMIT, report
    test_v = result.standardizer.transform(test_images)
    per_example = -model.free_energy(test_v) - result.gaussian_log_z.exact
    assert result.gaussian_test_log_likelihood == pytest.approx(float(per_example.mean()), abs=1e-9)
    train_v = result.standardizer.transform(train_images).to(torch.float64)
    mean, std = train_v.mean(0), train_v.std(0, unbiased=False)
    z = (test_v.to(torch.float64) - mean) / std
    independent = -(0.5 * z.square() + torch.log(std) + 0.5 * math.log(2 * math.pi)).sum(1)
    assert result.independent_test_log_likelihood == pytest.approx(float(independent.mean()), abs=1e-9)
    gain = per_example - independent
    assert float(gain.mean()) > Z_LIMIT * float(gain.std() / math.sqrt(gain.numel())), gain
    assert 0.0 < result.code_activity < 1.0
    # With the exact log Z the DBM's bound cannot exceed the best it could do, 0 nats.
    assert result.dbm_test_bound < 0.0 and math.isfinite(result.independent_code_log_likelihood)
    again = run_front_end(replace(config, ais_temperatures=100), train_images, test_images)
    assert torch.equal(again.gaussian_model.weights, model.weights)
    assert again.dbm_test_bound == result.dbm_test_bound


def test_reproduce_front_end_tiny_writes_its_files(tmp_path, reproduce):
    images = two_prototype_images(260, 3).numpy()
    labels = np.zeros(260, dtype=np.uint8)
    np.savez(
        tmp_path / "mnist.npz",
        x_train=images[:200],
        y_train=labels[:200],
        x_test=images[200:],
        y_test=labels[200:],
    )
    out = tmp_path / "run"
    outcome = reproduce("front-end", "--tiny", "--out", out, "--data-root", tmp_path, "--seed", "4")
    assert outcome.exit_code == 0, outcome.output
    for name in ("summary.md", "results.csv", "gaussian-rbm.safetensors", "dbm.safetensors"):
        assert (out / name).is_file(), name
    summary = (out / "summary.md").read_text()
    assert "Gaussian-binary RBM" in summary and "grey-level mnist" in summary.lower()
    loaded = bl.models.GaussianRBM.load(out / "gaussian-rbm.safetensors")
    rows = dict(line.split(",") for line in (out / "results.csv").read_text().splitlines()[1:])
    assert float(rows["gaussian_log_z_exact"]) == pytest.approx(bl.exact_log_z(loaded), abs=1e-5)
    refused = reproduce("front-end", "--tiny", "--out", out, "--dbm-hidden", "4,x")
    assert refused.exit_code != 0 and "--dbm-hidden" in refused.output

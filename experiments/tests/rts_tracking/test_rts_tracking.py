"""The RTS tracking experiment (Carlson et al. 2016, §4.4; docs/algorithms.md §4.3), tiny preset.

Properties checked: tracked records every ``track_every`` updates and AIS checkpoints every
``ais_every``; the tracked log-likelihood differs from AIS's by exactly the difference of the
two log Z (the same model, another log Z); the timings are positive and their ratios finite;
the figure has its two panels; ``boltzlab reproduce rts-tracking --tiny --no-timing`` writes
its three files.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from boltzlab.data import Dataset
from boltzlab_experiments.rts_tracking.config import RTSTrackingConfig
from boltzlab_experiments.rts_tracking.plots import tracking_figure
from boltzlab_experiments.rts_tracking.run import run_tracking
from boltzlab_experiments.rts_tracking.timing import run_timing


def _patterns(n: int, n_visible: int = 8, *, seed: int = 0, flip: float = 0.1) -> torch.Tensor:
    """``n`` noisy copies of three random prototypes."""
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(3, n_visible, generator=g) < 0.5).float()
    noise = (torch.rand(n, n_visible, generator=g) < flip).float()
    return (prototypes[torch.arange(n) % 3] + noise) % 2


@pytest.mark.slow
def test_tracking_experiment_pipeline_on_synthetic_data() -> None:
    dataset = Dataset(name="patterns", train=_patterns(60, 11), valid=_patterns(17, 11, seed=1))
    config = RTSTrackingConfig.tiny()
    result = run_tracking(config, dataset, seed=0)
    assert result.tracked.updates.tolist() == list(range(0, config.n_updates + 1, config.track_every))
    assert result.ais.updates.tolist() == list(range(0, config.n_updates + 1, config.ais_every))
    difference, stderr = result.differences()
    assert difference.shape == stderr.shape == result.expected_lag().shape == (result.ais.updates.numel(),)
    # The tracked log-likelihood is mean log f(v) − tracked log Ẑ: the same model, another log Z.
    shift = (
        result.tracked.train_log_likelihood[:: config.ais_every // config.track_every]
        - result.ais.train_log_likelihood
    )
    assert torch.allclose(shift, -difference, atol=1e-9)
    timings = run_timing(config, dataset, seed=0)
    assert all(min(values) > 0 for values in timings.cpu.values())
    assert math.isfinite(timings.tracking_fraction) and math.isfinite(timings.overhead_vs_pcd)
    figure = tracking_figure(result, timings)
    assert len(figure.axes) == 2


@pytest.mark.slow
def test_reproduce_rts_tracking_writes_its_files(tmp_path: Path, shared_data: Path, reproduce) -> None:
    out = tmp_path / "rts"
    result = reproduce("rts-tracking", "--tiny", "--no-timing", "--out", out, "--data-root", shared_data)
    assert result.exit_code == 0, result.output
    assert {path.name for path in out.iterdir()} == {"tracking.png", "tracking.csv", "summary.md"}
    assert "tracked − AIS" in (out / "summary.md").read_text()

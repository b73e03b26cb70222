"""TensorBoard logging: ``TensorBoardLogger`` and ``boltzlab train --tensorboard``.

Properties checked: the event file read back (TensorBoard's own ``EventAccumulator``) holds a
scalar per record for every metric the history holds — at exactly the updates of the records
that hold it — the ``samples`` image with the tiled size, and a histogram of every parameter
at every record; logging does not change the run (same seed, bit-identical parameters with
and without the logger); ``--tensorboard`` without a directory writes ``RUN_DIR/tensorboard``;
without the tensorboard package the logger refuses with the install command.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.cli.run_files import read_metrics
from boltzlab.training.tensorboard import TensorBoardLogger, TensorBoardMissingError, tile_states

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="tensorboard is not installed: pip install 'boltzlab[tensorboard]' (or the dev extra)",
)


def read_events(directory: Path):
    accumulator = event_accumulator.EventAccumulator(
        str(directory), size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0}
    )
    accumulator.Reload()
    return accumulator


def train_small(tmp_path: Path, callbacks=()) -> bl.TrainResult:
    data = bl.data.load("bars-and-stripes", size=3).train
    model = bl.RBM(n_visible=9, n_hidden=4, generator=0)
    return bl.train(
        model, data, algorithm="pt", algorithm_params={"n_levels": 3}, n_updates=25, batch_size=7,
        log_every=10, track_exact_every=5, generator=1, callbacks=list(callbacks),
    )  # fmt: skip


def test_event_file_holds_scalars_images_and_histograms_at_the_record_steps(tmp_path: Path):
    logger = TensorBoardLogger(tmp_path / "tb", n_images=5, sample_sweeps=3, seed=2)
    result = train_small(tmp_path, [logger])
    events = read_events(tmp_path / "tb")
    tags = events.Tags()
    steps = [record.update for record in result.history]
    assert steps == [0, 5, 10, 15, 20, 25]
    for name in ("learning_rate", "reconstruction_error", "time", "log_z", "train_log_likelihood"):
        logged = events.Scalars(f"metrics/{name}")
        assert [event.step for event in logged] == steps
        assert [event.value for event in logged] == pytest.approx(
            [record.get(name) for record in result.history], rel=1e-6
        )
    for name in ("swap_acceptance", "round_trips_per_step"):  # PT's rates, absent before training
        expected = [
            r.update for r in result.history if r.get(name) is not None and math.isfinite(r.get(name))
        ]
        assert expected and [event.step for event in events.Scalars(f"metrics/{name}")] == expected
    images = events.Images("samples")
    assert [image.step for image in images] == steps
    # 5 states of 3×3 pixels in 3 columns × 2 rows, padding 1.
    assert (images[-1].height, images[-1].width) == (2 * 4 + 1, 3 * 4 + 1)
    for name in ("weights", "visible_bias", "hidden_bias"):
        histograms = events.Histograms(f"parameters/{name}")
        assert [event.step for event in histograms] == steps
        assert histograms[-1].histogram_value.num == result.model.get_parameter(name).numel()
    assert "run/config/text_summary" in tags["tensors"]


def test_logging_leaves_the_run_unchanged(tmp_path: Path):
    plain = train_small(tmp_path)
    logged = train_small(tmp_path, [TensorBoardLogger(tmp_path / "tb", n_images=4, sample_sweeps=5)])
    for name, parameter in plain.model.named_parameters():
        assert torch.equal(parameter, logged.model.get_parameter(name)), name


def test_train_tensorboard_flag_writes_run_dir_tensorboard(tmp_path: Path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        cli,
        ["train", "--data", "digits", "--hidden", "6", "--updates", "30", "--log-every", "10",
         "--tensorboard", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'tensorboard'}" in result.output
    events = read_events(out / "tensorboard")
    records = read_metrics(out / "metrics.csv")
    assert [e.step for e in events.Scalars("metrics/reconstruction_error")] == [r.update for r in records]
    assert [image.step for image in events.Images("samples")] == [0, 10, 20, 30]
    # Digits are 8×8 images: 16 chains in a 4 × 4 grid, padding 1.
    assert (events.Images("samples")[0].height, events.Images("samples")[0].width) == (37, 37)
    assert "\ntensorboard =" not in (out / "config.toml").read_text(encoding="utf-8")  # where, not what


def test_missing_tensorboard_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import now raises ImportError
    with pytest.raises(TensorBoardMissingError, match=r"pip install 'boltzlab\[tensorboard\]'"):
        TensorBoardLogger(tmp_path / "tb")
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--data",
            "digits",
            "--hidden",
            "4",
            "--updates",
            "2",
            "--tensorboard",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: TensorBoard logging needs the tensorboard package, which is not installed: "
        "pip install 'boltzlab[tensorboard]'"
    ]


def test_tile_states_places_each_state_in_its_cell():
    states = torch.arange(2 * 6, dtype=torch.float32).reshape(2, 6) / 11
    grid = tile_states(states, (2, 3))
    assert grid.shape == (1 * 3 + 1, 2 * 4 + 1)
    assert torch.equal(grid[1:3, 1:4], states[0].reshape(2, 3))
    assert torch.equal(grid[1:3, 5:8], states[1].reshape(2, 3))
    assert float(grid[0, 0]) == 0.5  # padding

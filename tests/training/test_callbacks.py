"""Callbacks: exact tracking, CSV metrics, progress bar, early stopping, custom callbacks.

Properties checked: the tracker's numbers equal exact_log_z and log_likelihood computed
directly on the final model; the CSV has a header and one row per record, with empty cells
where a metric was not measured; the progress bar runs and shows the update count; early
stopping ends a run whose metric stops improving and says so; a custom callback can add an
extra metric that lands in the history and the CSV.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab.training import Callback, EarlyStopping, TrainRecord, train


def _data(n: int = 24, seed: int = 0) -> torch.Tensor:
    return (torch.rand(n, 7, generator=torch.Generator().manual_seed(seed)) < 0.3).float()


def test_exact_tracker_matches_direct_computation() -> None:
    data, validation = _data(), _data(9, seed=1)
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    result = train(
        model,
        data,
        validation_data=validation,
        batch_size=6,
        n_updates=12,
        log_every=4,
        track_exact_every=6,
        learning_rate=0.1,
        generator=0,
    )
    assert [r.update for r in result.history] == [0, 4, 6, 8, 12]
    tracked = [r.update for r in result.history if r.log_z is not None]
    assert tracked == [0, 6, 12]
    last = result.history[-1]
    log_z = bl.exact_log_z(model)
    assert last.log_z == pytest.approx(log_z, abs=1e-9)
    assert last.train_log_likelihood == pytest.approx(bl.log_likelihood(model, data, log_z), abs=1e-9)
    assert last.validation_log_likelihood == pytest.approx(
        bl.log_likelihood(model, validation, log_z), abs=1e-9
    )
    assert all(isinstance(r, TrainRecord) and r.reconstruction_error > 0 for r in result.history)
    assert all(a.time <= b.time for a, b in zip(result.history, result.history[1:], strict=False))


def test_csv_has_header_and_one_row_per_record(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.csv"
    result = train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        _data(),
        batch_size=6,
        n_updates=10,
        log_every=3,
        track_exact_every=5,
        metrics_path=path,
        generator=0,
    )
    with path.open() as stream:
        rows = list(csv.reader(stream))
    header, body = rows[0], rows[1:]
    assert header[:5] == ["update", "epoch", "learning_rate", "time", "reconstruction_error"]
    assert "train_log_likelihood" in header and "validation_log_likelihood" in header
    assert len(body) == len(result.history) == 6  # updates 0, 3, 5, 6, 9, 10
    column = header.index("train_log_likelihood")
    for row, record in zip(body, result.history, strict=True):
        assert int(row[0]) == record.update
        assert float(row[header.index("reconstruction_error")]) == record.reconstruction_error
        assert (row[column] == "") == (record.train_log_likelihood is None)
        assert row[header.index("validation_log_likelihood")] == ""  # no validation data given
    assert result.run_dir == path.parent


def test_progress_bar_shows_updates(capsys: pytest.CaptureFixture[str]) -> None:
    train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        _data(),
        batch_size=6,
        n_updates=8,
        log_every=4,
        progress=True,
        generator=0,
    )
    shown = capsys.readouterr().err
    assert "8/8" in shown and "update" in shown
    train(bl.RBM(n_visible=7, n_hidden=3, generator=0), _data(), batch_size=6, n_updates=8, generator=0)
    assert capsys.readouterr().err == ""


def test_early_stopping_stops_a_run_that_does_not_improve() -> None:
    class Flat(Callback):
        def measure(self, run) -> dict[str, float]:
            return {"flat": 1.0}

    stopper = EarlyStopping("flat", patience=2, mode="min")
    result = train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        _data(),
        batch_size=6,
        n_updates=100,
        log_every=5,
        callbacks=[Flat(), stopper],
        generator=0,
    )
    assert result.stopped_early
    assert result.n_updates == 10 == result.history[-1].update  # records at 0 (best), 5, 10
    assert result.history[-1].extra == {"flat": 1.0}
    complete = train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        _data(),
        batch_size=6,
        n_updates=10,
        log_every=5,
        callbacks=[EarlyStopping(patience=1)],
        generator=0,
    )
    assert not complete.stopped_early  # no validation data: the metric never appears


def test_custom_callback_sees_every_update_and_adds_metrics(tmp_path: Path) -> None:
    class Counter(Callback):
        def __init__(self) -> None:
            self.updates: list[int] = []
            self.ended = self.closed = False

        def wants_record(self, update: int) -> bool:
            return update == 7

        def measure(self, run) -> dict[str, float]:
            return {"weight_norm": float(run.model.weights.norm())}

        def on_update(self, run) -> None:
            self.updates.append(run.update)

        def on_train_end(self, run) -> None:
            self.ended = True

        def close(self) -> None:
            self.closed = True

    counter = Counter()
    path = tmp_path / "metrics.csv"
    result = train(
        bl.RBM(n_visible=7, n_hidden=3, generator=0),
        _data(),
        batch_size=6,
        n_updates=9,
        log_every=4,
        callbacks=[counter],
        metrics_path=path,
        generator=0,
    )
    assert counter.updates == list(range(1, 10)) and counter.ended and counter.closed
    assert [r.update for r in result.history] == [0, 4, 7, 8, 9]
    assert result.history[2].extra["weight_norm"] == pytest.approx(
        float(result.history[2].get("weight_norm"))
    )
    with path.open() as stream:
        assert next(csv.reader(stream))[-1] == "weight_norm"

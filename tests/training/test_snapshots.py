"""The training trajectory: geometric snapshots, its file, resumption, and trajectory AIS end to end.

Properties checked:
* ``geometric_updates`` starts at 0, ends at the last update, ascends, stays under its cap,
  keeps every early update and a constant ratio late (doubling for 1000 updates and 12 points);
* the recorder keeps exactly those updates, their parameters bit for bit, and writes a
  ``trajectory.safetensors`` that loads back equal to what it holds;
* a run interrupted after a checkpoint and resumed records the same trajectory, bit for bit,
  as the run that was not interrupted; models other than RBMs are not recorded;
* a trajectory round-trips through save/load bit-exactly (float32 and float64, base logits and
  metadata included); damaged, foreign or inconsistent files raise one clear ModelFileError;
* end to end: a 6×3 RBM trained by PCD for 400 updates with the recorder, then trajectory AIS
  through its run directory, lands within 4 standard errors of the exact log Z.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from safetensors.torch import save as safetensors_save

import boltzlab as bl
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.estimators.trajectory.ais import trajectory_ais
from boltzlab.models.trajectory import TRAJECTORY_FILE, Trajectory
from boltzlab.training import Callback, train
from boltzlab.training.snapshots import SnapshotRecorder, geometric_updates
from tolerances import MAX_Z


def _data(n_examples: int = 60, n_visible: int = 7, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    prototypes = (torch.rand(3, n_visible, generator=g) < 0.5).float()
    noise = (torch.rand(n_examples, n_visible, generator=g) < 0.1).float()
    return (prototypes[torch.arange(n_examples) % 3] + noise) % 2


# ---------------------------------------------------------------------------- schedule
@pytest.mark.parametrize(
    ("n_updates", "max_snapshots"), [(1000, 12), (3000, 64), (10, 64), (10**6, 128), (100, 2)]
)
def test_geometric_updates(n_updates, max_snapshots):
    updates = geometric_updates(n_updates, max_snapshots)
    assert updates[0] == 0 and updates[-1] == n_updates
    assert all(b > a for a, b in pairwise(updates))
    assert len(updates) <= max_snapshots
    if n_updates + 1 <= max_snapshots:
        assert updates == tuple(range(n_updates + 1))
    elif max_snapshots >= 12:
        assert len(updates) == max_snapshots  # the cap is used, not wasted
        if max_snapshots >= 64:
            assert updates[:4] == (0, 1, 2, 3)
        late = [b / a for a, b in zip(updates[-6:], updates[-5:], strict=False)]
        assert max(late) / min(late) < 1.05  # a constant ratio where the grid is coarse
    assert geometric_updates(1000, 12) == (0, 1, 2, 4, 8, 16, 32, 63, 126, 251, 501, 1000)


def test_geometric_updates_refuses_bad_arguments():
    with pytest.raises(ValidationError, match="n_updates"):
        geometric_updates(0)
    with pytest.raises(ValidationError, match="at least 2"):
        geometric_updates(10, 1)


# ---------------------------------------------------------------------------- recorder
class KeepParameters(Callback):
    """Copies of the parameters after every update, to compare with the recorder's snapshots."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[torch.Tensor, ...]] = {}

    def on_train_begin(self, run) -> None:
        self.on_update(run)

    def on_update(self, run) -> None:
        model = run.model
        self.seen[run.update] = tuple(
            p.detach().clone() for p in (model.weights, model.visible_bias, model.hidden_bias)
        )


def test_recorder_keeps_geometric_snapshots_and_writes_a_loadable_file(tmp_path):
    recorder, keeper = SnapshotRecorder(tmp_path / "run", max_snapshots=9), KeepParameters()
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    train(
        model,
        _data(),
        algorithm="pcd",
        n_chains=13,
        batch_size=20,
        n_updates=50,
        callbacks=[keeper, recorder],
        generator=1,
    )
    assert recorder.updates == geometric_updates(50, 9)
    trajectory = recorder.trajectory()
    assert trajectory.updates.tolist() == [-1, *geometric_updates(50, 9)]
    assert trajectory.base_logits is not None and torch.equal(trajectory.base_logits, model.base_logits)
    assert trajectory.metadata["training"]["n_updates"] == 50
    for index, update in enumerate(trajectory.updates.tolist()[1:], start=1):
        weights, visible_bias, hidden_bias = keeper.seen[update]
        assert torch.equal(trajectory.weights[index], weights)
        assert torch.equal(trajectory.visible_bias[index], visible_bias)
        assert torch.equal(trajectory.hidden_bias[index], hidden_bias)
    assert torch.equal(trajectory.weights[-1], model.weights.detach())  # the final model
    assert torch.count_nonzero(trajectory.weights[0]) == 0
    loaded = Trajectory.load(tmp_path / "run")
    assert recorder.path == tmp_path / "run" / TRAJECTORY_FILE and recorder.path.is_file()
    for name in ("weights", "visible_bias", "hidden_bias", "updates", "base_logits"):
        assert torch.equal(getattr(loaded, name), getattr(trajectory, name)), name
    assert loaded.metadata == json.loads(json.dumps(trajectory.metadata))


def test_recorder_writes_the_final_update_of_a_stopped_run_and_keeps_memory_only_without_directory():
    recorder = SnapshotRecorder(max_snapshots=64)
    train(bl.RBM(7, 3, generator=0), _data(), batch_size=20, n_updates=7, callbacks=[recorder], generator=0)
    assert recorder.updates == tuple(range(8)) and recorder.path is None and recorder.write() is None


class Interrupted(Exception):
    """Stands in for a killed process."""


class InterruptAt(Callback):
    def __init__(self, update: int) -> None:
        self.at = update

    def on_update(self, run) -> None:
        if run.update == self.at:
            raise Interrupted


def _resumable_run(directory: Path, *, callbacks=(), resume: bool = False):
    model = bl.RBM(n_visible=7, n_hidden=3, generator=5)
    recorder = SnapshotRecorder(directory, max_snapshots=12)
    train(
        model,
        _data(),
        algorithm="pcd",
        n_chains=13,
        batch_size=20,
        n_updates=60,
        learning_rate=0.1,
        checkpoint_dir=directory / "checkpoints",
        checkpoint_every=20,
        callbacks=[recorder, *callbacks],
        generator=3,
        resume=resume,
    )
    return recorder


def test_resumed_run_records_the_same_trajectory(tmp_path):
    whole = _resumable_run(tmp_path / "whole")
    with pytest.raises(Interrupted):
        _resumable_run(tmp_path / "cut", callbacks=[InterruptAt(47)])
    # The file was written at the checkpoint (update 40); the snapshots after it are lost.
    before_cut = max(update for update in geometric_updates(60, 12) if update <= 40)
    assert Trajectory.load(tmp_path / "cut").updates.tolist()[-1] == before_cut
    resumed = _resumable_run(tmp_path / "cut", resume=True)
    expected, got = Trajectory.load(tmp_path / "whole"), Trajectory.load(tmp_path / "cut")
    assert got.updates.tolist() == expected.updates.tolist() == [-1, *geometric_updates(60, 12)]
    for name in ("weights", "visible_bias", "hidden_bias", "base_logits"):
        assert torch.equal(getattr(got, name), getattr(expected, name)), name
    assert resumed.updates == whole.updates


def test_resume_without_the_trajectory_file_warns_and_restarts_the_trajectory(tmp_path):
    with pytest.raises(Interrupted):
        _resumable_run(tmp_path, callbacks=[InterruptAt(47)])
    (tmp_path / TRAJECTORY_FILE).unlink()
    with pytest.warns(UserWarning, match="cannot restore the training trajectory"):
        recorder = _resumable_run(tmp_path, resume=True)
    assert recorder.updates[0] == 40 and recorder.updates[-1] == 60
    assert Trajectory.load(tmp_path).updates.tolist()[:2] == [-1, 40]


def test_models_other_than_rbms_are_not_recorded(tmp_path):
    recorder = SnapshotRecorder(tmp_path)
    dbm = bl.DBM(layer_sizes=[7, 3, 2], generator=0)
    train(
        dbm,
        _data(),
        algorithm="pcd",
        n_chains=13,
        batch_size=20,
        n_updates=3,
        callbacks=[recorder],
        generator=0,
    )
    assert recorder.trajectory() is None and not (tmp_path / TRAJECTORY_FILE).exists()


# ---------------------------------------------------------------------------- the file
def _trajectory(dtype=torch.float64, *, base: bool = True) -> Trajectory:
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(5, 3, generator=g, dtype=torch.float64) * scale for scale in (0.01, 0.5, 1.0)]
    return Trajectory.from_snapshots(
        weights,
        [torch.randn(5, generator=g, dtype=torch.float64) for _ in weights],
        [torch.randn(3, generator=g, dtype=torch.float64) for _ in weights],
        updates=[0, 4, 16],
        base_logits=torch.randn(5, generator=g, dtype=torch.float64) if base else None,
        metadata={"note": "hand-made", "values": [1, 2.5, None]},
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("base", [True, False])
def test_save_load_round_trip_is_bit_exact(tmp_path, dtype, base):
    trajectory = _trajectory(dtype, base=base)
    for target in (tmp_path / "dir", tmp_path / "named.safetensors"):
        written = trajectory.save(target)
        assert written.is_file() and written.name in (TRAJECTORY_FILE, "named.safetensors")
        loaded = Trajectory.load(target)
        assert loaded.dtype == dtype and loaded.n_points == 4
        for name in ("weights", "visible_bias", "hidden_bias", "updates"):
            assert torch.equal(getattr(loaded, name), getattr(trajectory, name)), name
        assert (loaded.base_logits is None) == (not base)
        if base:
            assert torch.equal(loaded.base_logits, trajectory.base_logits)
        assert loaded.metadata == trajectory.metadata
    # A run directory may keep it under checkpoints/ too.
    trajectory.save(tmp_path / "run" / "checkpoints")
    assert Trajectory.load(tmp_path / "run").n_points == 4


def test_construction_anchor_and_interpolation():
    trajectory = _trajectory()
    assert trajectory.updates.tolist() == [-1, 0, 4, 16]
    assert torch.count_nonzero(trajectory.weights[0]) == 0
    assert torch.equal(trajectory.visible_bias[0], trajectory.visible_bias[1])
    softplus = torch.nn.functional.softplus
    assert trajectory.anchor_log_z == pytest.approx(
        float(softplus(trajectory.visible_bias[0]).sum() + softplus(trajectory.hidden_bias[0]).sum()),
        abs=1e-12,
    )
    anchor = trajectory.model_at(0)
    assert bl.exact_log_z(anchor) == pytest.approx(trajectory.anchor_log_z, abs=1e-10)
    middle = trajectory.model_at(2.25)
    expected = 0.75 * trajectory.weights[2] + 0.25 * trajectory.weights[3]
    assert torch.allclose(middle.weights.detach(), expected, atol=1e-15, rtol=0)
    assert torch.equal(trajectory.model_at(3).weights.detach(), trajectory.weights[3])
    assert middle.base_fitted and torch.equal(middle.base_logits, trajectory.base_logits)
    with pytest.raises(ValidationError, match=r"must be in \[0, 3\]"):
        trajectory.model_at(3.5)
    # Snapshots that already start at zero weights get no second anchor.
    zero_start = Trajectory.from_snapshots(
        [torch.zeros(2, 2), torch.ones(2, 2)], [torch.zeros(2)] * 2, [torch.zeros(2)] * 2, updates=[0, 3]
    )
    assert zero_start.updates.tolist() == [0, 3]
    # Exact draws of the anchor: visible means σ(b_0).
    chains = trajectory.sample_anchor(40_000, generator=0)
    p = torch.sigmoid(trajectory.visible_bias[0])
    z = (chains.visible.mean(0) - p) / torch.sqrt(p * (1 - p) / 40_000)
    assert float(z.abs().max()) < MAX_Z + 0.5


def test_select_and_ending_at():
    trajectory = _trajectory()
    model = trajectory.model_at(3)
    assert trajectory.ends_at(model) and trajectory.ending_at(model) is trajectory
    other = trajectory.model_at(2.5)
    extended = trajectory.ending_at(other)
    assert extended.n_points == 5 and extended.updates.tolist() == [-1, 0, 4, 16, 17]
    assert torch.equal(extended.weights[-1], other.weights.detach())
    subset = trajectory.select([0, 2, 3])
    assert subset.updates.tolist() == [-1, 4, 16]
    with pytest.raises(ValidationError, match="keep point 0"):
        trajectory.select([1, 2])
    with pytest.raises(ValidationError, match="holds a 5x3 RBM but model is 4x3"):
        trajectory.check_model(bl.RBM(4, 3))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"updates": torch.tensor([-1, 0, 4, 4])}, "increase strictly"),
        ({"updates": torch.tensor([-1, 0, 4])}, "updates must be an int64 tensor of shape"),
        ({"updates": torch.tensor([-1.0, 0.0, 4.0, 16.0])}, "int64"),
        ({"hidden_bias": torch.zeros(4, 2, dtype=torch.float64)}, r"hidden_bias has shape \(4, 2\)"),
        ({"weights": torch.zeros(4, 5, dtype=torch.float64)}, "n_points, n_visible, n_hidden"),
        ({"weights": torch.ones(4, 5, 3, dtype=torch.float64)}, "zero weights"),
        ({"visible_bias": torch.full((4, 5), math.nan, dtype=torch.float64)}, "NaN"),
        ({"base_logits": torch.zeros(3, dtype=torch.float64)}, "base_logits"),
        ({"visible_bias": torch.zeros(4, 5, dtype=torch.float32)}, "one floating dtype"),
    ],
)
def test_inconsistent_trajectories_are_refused(change, message):
    trajectory = _trajectory()
    fields = {
        name: getattr(trajectory, name)
        for name in ("weights", "visible_bias", "hidden_bias", "updates", "base_logits")
    }
    with pytest.raises(ValidationError, match=message):
        Trajectory(**{**fields, **change})


def _write_raw(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> Path:
    path.write_bytes(safetensors_save(tensors, metadata=metadata))
    return path


def _good_header(n_points: int = 4) -> dict[str, str]:
    return {
        "format": "boltzlab-trajectory",
        "format_version": "1",
        "n_points": str(n_points),
        "metadata": "{}",
    }


def _good_tensors() -> dict[str, torch.Tensor]:
    trajectory = _trajectory()
    return {
        name: getattr(trajectory, name).contiguous()
        for name in ("weights", "visible_bias", "hidden_bias", "updates")
    }


def test_damaged_or_foreign_files_are_refused_clearly(tmp_path):
    good = _trajectory().save(tmp_path / "good.safetensors")
    data = good.read_bytes()
    cases = {
        "empty": (b"", "only 0 bytes"),
        "truncated": (data[: len(data) // 2], "safetensors refused it"),
        "garbage": (b"\x00" * 64, "not a safetensors file"),
        "pickle": (b"\x80\x04\x95" + b"\x00" * 40, "not a safetensors file"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.safetensors"
        path.write_bytes(content)
        with pytest.raises(ModelFileError, match=message):
            Trajectory.load(path)
    model_file = bl.RBM(5, 3, generator=0).save(tmp_path / "model.safetensors")
    with pytest.raises(ModelFileError, match="boltzlab model file"):
        Trajectory.load(model_file)
    with pytest.raises(ModelFileError, match="does not exist"):
        Trajectory.load(tmp_path / "absent.safetensors")


@pytest.mark.parametrize(
    ("tensors", "header", "message"),
    [
        ({"updates": None}, {}, r"tensors \['updates'\] are missing"),
        ({"extra": torch.zeros(2)}, {}, "unexpected tensors"),
        ({}, {"format_version": "2"}, "format version"),
        ({}, {"n_points": "3"}, "n_points"),
        ({}, {"metadata": "[1, 2]"}, "not a JSON object"),
        ({"updates": torch.tensor([-1, 5, 4, 16])}, {}, "increase strictly"),
        ({"hidden_bias": torch.zeros(4, 2, dtype=torch.float64)}, {}, "hidden_bias has shape"),
        ({"weights": torch.full((4, 5, 3), math.inf, dtype=torch.float64)}, {}, "NaN or infinite"),
    ],
)
def test_inconsistent_files_are_refused_with_the_file_named(tmp_path, tensors, header, message):
    payload = {**_good_tensors(), **tensors}
    payload = {name: tensor for name, tensor in payload.items() if tensor is not None}
    path = _write_raw(tmp_path / "bad.safetensors", payload, {**_good_header(), **header})
    with pytest.raises(ModelFileError, match=message) as error:
        Trajectory.load(path)
    assert str(path) in str(error.value)


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_pcd_run_then_trajectory_ais_matches_exact_log_z(tmp_path):
    # A 6x3 RBM trained hard (PCD, learning rate 0.05, 400 updates) on three noisy prototypes;
    # the recorder writes the run's trajectory, and trajectory AIS through the run directory
    # lands within MAX_Z standard errors of the exact log Z.
    data = _data(120, 6, seed=4)
    model = bl.RBM(n_visible=6, n_hidden=3, generator=0, dtype=torch.float64)
    recorder = SnapshotRecorder(tmp_path)
    train(
        model,
        data,
        algorithm="pcd",
        n_chains=50,
        batch_size=20,
        n_updates=400,
        learning_rate=0.05,
        callbacks=[recorder],
        generator=2,
    )
    assert recorder.path.is_file()
    exact = bl.exact_log_z(model)
    result = bl.estimate_log_z(model, method="trajectory-ais", trajectory=tmp_path, generator=1)
    assert not result.info.appended_model and result.info.updates[-1] == 400
    assert abs(result.log_z - exact) < MAX_Z * result.stderr, (result.log_z, exact, result.stderr)
    assert result.stderr < 0.1 and result.reliable, result.warnings
    direct = trajectory_ais(model, trajectory=recorder.trajectory(), generator=1)
    assert direct.log_z == result.log_z


# ---------------------------------------------------------------------------- on by default in train
def _default_run(directory: Path | None = None, **options):
    model = bl.RBM(n_visible=7, n_hidden=3, generator=5)
    where = {} if directory is None else {"checkpoint_dir": directory / "checkpoints", "checkpoint_every": 20}
    result = train(
        model,
        _data(),
        algorithm="pcd",
        n_chains=13,
        batch_size=20,
        n_updates=60,
        learning_rate=0.1,
        generator=3,
        **where,
        **options,
    )
    return model, result


def test_train_records_a_trajectory_by_default_and_draws_no_random_numbers(tmp_path):
    model, result = _default_run(tmp_path)
    assert result.trajectory.updates.tolist() == [-1, *geometric_updates(60, 64)]
    assert result.trajectory.ends_at(model)
    on_disk = Trajectory.load(tmp_path / "checkpoints")  # beside the checkpoints
    assert torch.equal(on_disk.weights, result.trajectory.weights)
    plain, nothing = _default_run(snapshots=None)
    assert nothing.trajectory is None
    assert torch.equal(plain.weights, model.weights)  # recording changes nothing in the run
    few, _ = _default_run(snapshots=0)
    assert torch.equal(few.weights, model.weights)
    _, small = _default_run(snapshots=5, snapshot_dir=tmp_path / "elsewhere")
    assert len(small.trajectory.updates) <= 6
    assert Trajectory.load(tmp_path / "elsewhere").updates.tolist() == small.trajectory.updates.tolist()
    with pytest.raises(ValidationError, match="snapshots"):
        _default_run(snapshots=1)


def test_train_default_trajectory_survives_a_resume_bit_for_bit(tmp_path):
    _, whole = _default_run(tmp_path / "whole")
    with pytest.raises(Interrupted):
        _default_run(tmp_path / "cut", callbacks=[InterruptAt(47)])
    _, resumed = _default_run(tmp_path / "cut", resume=True)
    assert resumed.trajectory.updates.tolist() == whole.trajectory.updates.tolist()
    for name in ("weights", "visible_bias", "hidden_bias"):
        assert torch.equal(getattr(resumed.trajectory, name), getattr(whole.trajectory, name)), name


def test_trajectory_files_are_found_beside_the_model_or_in_checkpoints(tmp_path):
    from boltzlab.models.trajectory import find_trajectory_file, load_trajectory, save_trajectory

    trajectory = Trajectory.from_snapshots(
        [torch.ones(4, 2)], [torch.zeros(4)], [torch.zeros(2)], updates=[3], metadata={"note": "x"}
    )
    assert find_trajectory_file(tmp_path) is None
    written = save_trajectory(trajectory, tmp_path / "checkpoints")
    assert written == tmp_path / "checkpoints" / TRAJECTORY_FILE
    assert find_trajectory_file(tmp_path) == written  # a bl.train run keeps it in checkpoint_dir
    beside = trajectory.save(tmp_path)
    assert find_trajectory_file(tmp_path) == beside  # boltzlab train's, beside the model, first
    loaded = load_trajectory(tmp_path, dtype=torch.float64)
    assert loaded.dtype == torch.float64 and loaded.metadata == {"note": "x"}
    assert loaded.updates.tolist() == [-1, 3]

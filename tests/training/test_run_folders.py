"""One run per folder: the lock, leftover temporaries, and the run identity in checkpoints.

Properties checked:
* a claimed folder refuses a second claim (another open of the lock, as another process
  would), naming the owner; release, or the owner's death (``kill -9``), frees it;
* ``write_atomic``'s leftover ``.tmp`` files are removed when a folder is claimed and released;
* ``bl.train`` holds its ``checkpoint_dir`` for the run and writes its ``run_id`` into every
  checkpoint; ``resume=True`` with another ``run_id`` refuses the checkpoint;
* ``boltzlab train`` into a busy folder is refused before it writes anything (``config.toml``
  untouched), two started together leave one run's files, and ``--resume`` refuses a
  checkpoint copied in from another run's folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.errors import ValidationError
from boltzlab.io import load_checkpoint
from boltzlab.io.run_lock import (
    LOCK_NAME,
    claim_run_folder,
    read_run_id,
    remove_leftover_temporaries,
    run_folder,
    write_run_id,
)
from boltzlab.training import find_latest_checkpoint, train

_HOLD = """
import sys, time
from boltzlab.io.run_lock import claim_run_folder
held = claim_run_folder(sys.argv[1])
print("claimed", flush=True)
time.sleep(60)
"""

pytestmark = pytest.mark.fault("run folders")


def test_a_claimed_folder_refuses_a_second_claim_until_released(tmp_path: Path) -> None:
    first = claim_run_folder(tmp_path / "run")
    owner = json.loads((tmp_path / "run" / LOCK_NAME).read_text())
    assert owner["pid"] == os.getpid()
    with pytest.raises(
        ValidationError, match=rf"in use by another run \(process {os.getpid()} on .*one folder holds one run"
    ):
        claim_run_folder(tmp_path / "run")
    first.release()
    first.release()  # idempotent
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    with run_folder(tmp_path / "run"):
        pass


@pytest.mark.slow  # a separate Python process or two (CONTRIBUTING.md, "Two tiers")
def test_a_killed_owner_leaves_no_lock_behind(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        with pytest.raises(ValidationError, match=f"process {holder.pid}"):
            claim_run_folder(folder)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    # The lock file is still there (kill -9 ran no clean-up), but its lock died with its owner.
    assert (folder / LOCK_NAME).exists()
    claim_run_folder(folder).release()


def test_leftover_temporaries_are_removed_when_claimed_and_released(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    (folder / "checkpoints").mkdir(parents=True)
    leftovers = [
        folder / ".model.safetensors.0123456789ab.tmp",
        folder / "checkpoints" / ".c.safetensors.ba9876543210.tmp",
    ]
    kept = [folder / "notes.tmp", folder / "model.safetensors", folder / ".hidden"]
    for path in leftovers + kept:
        path.write_bytes(b"x")
    claimed = claim_run_folder(folder)
    assert sorted(claimed.removed) == sorted(leftovers)
    assert all(path.exists() for path in kept) and not any(path.exists() for path in leftovers)
    leftovers[0].write_bytes(b"x")
    claimed.release()
    assert not leftovers[0].exists()
    assert remove_leftover_temporaries(tmp_path / "missing") == []


def test_run_id_file_round_trips_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    assert read_run_id(tmp_path) is None
    write_run_id(tmp_path, "abc123")
    assert read_run_id(tmp_path) == "abc123"
    (tmp_path / "run.json").write_text('{"run_id": "../x"}')
    with pytest.raises(ValidationError, match=r"run\.json is damaged"):
        read_run_id(tmp_path)


def _data() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return (torch.rand(37, 9, generator=g) < 0.4).float()


def _train(folder: Path, **settings):
    base = {"batch_size": 8, "n_updates": 4, "checkpoint_dir": folder, "generator": 0, "log_every": 2}
    return train(bl.RBM(n_visible=9, n_hidden=4, generator=0), _data(), **{**base, **settings})


def test_train_writes_its_run_id_and_resume_refuses_another_runs_checkpoint(tmp_path: Path) -> None:
    _train(tmp_path, run_id="first")
    assert load_checkpoint(find_latest_checkpoint(tmp_path)).metadata["run"] == "first"
    assert not (tmp_path / LOCK_NAME).exists()  # released at the end
    with pytest.raises(ValidationError, match="it belongs to run first, and this run is second"):
        _train(tmp_path, n_updates=8, resume=True, run_id="second")
    resumed = _train(tmp_path, n_updates=8, resume=True, run_id="first")
    assert resumed.history[-1].update == 8
    # Without a run_id a resume keeps the checkpoint's; a fresh run gets a new one.
    _train(tmp_path, n_updates=12, resume=True)
    assert load_checkpoint(find_latest_checkpoint(tmp_path)).metadata["run"] == "first"
    _train(tmp_path / "fresh")
    assert load_checkpoint(find_latest_checkpoint(tmp_path / "fresh")).metadata["run"].isalnum()
    with pytest.raises(ValidationError, match="run_id must be"):
        _train(tmp_path / "bad", run_id="a/b")


def test_train_refuses_a_checkpoint_folder_another_run_holds(tmp_path: Path) -> None:
    with run_folder(tmp_path), pytest.raises(ValidationError, match="in use by another run"):
        _train(tmp_path)
    assert find_latest_checkpoint(tmp_path) is None


def _invoke(*args: object):
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def _cli_train(out: Path, seed: int, *extra: object):
    return _invoke(
        "train", "--data", "digits", "--hidden", "4", "--updates", "20", "--out", out, "--seed", seed, *extra
    )


def test_cli_train_into_a_busy_folder_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with run_folder(out):
        result = _cli_train(out, 8)
        assert sorted(path.name for path in out.iterdir()) == [LOCK_NAME]  # no config.toml, no run.json
    assert result.exit_code == 1 and "in use by another run" in result.stderr
    assert not out.exists()  # the holder created it and left it empty


def test_cli_train_refused_for_its_size_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = _invoke("train", "--data", "digits", "--hidden", "100000000", "--epochs", "1", "--out", out)
    assert result.exit_code == 1 and "would need at least" in result.stderr and "--hidden" in result.stderr
    assert not out.exists()


def test_cli_resume_refuses_a_checkpoint_copied_from_another_run(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    assert _cli_train(first, 7).exit_code == 0 and _cli_train(second, 8).exit_code == 0
    assert read_run_id(first) != read_run_id(second)
    copied = first / "checkpoints" / "checkpoint-000000999.safetensors"
    copied.write_bytes(find_latest_checkpoint(second / "checkpoints").read_bytes())
    config_before = (first / "config.toml").read_bytes()
    result = _invoke(
        "train", "--config", first / "config.toml", "--out", first, "--updates", "1200", "--resume"
    )
    assert result.exit_code == 1 and f"it belongs to run {read_run_id(second)}" in result.stderr
    assert (first / "config.toml").read_bytes() == config_before
    copied.unlink()
    result = _invoke(
        "train", "--config", first / "config.toml", "--out", first, "--updates", "40", "--resume"
    )
    assert result.exit_code == 0, result.output


@pytest.mark.slow  # a separate Python process or two (CONTRIBUTING.md, "Two tiers")
def test_two_trainings_started_together_leave_one_runs_files(tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-c",
        "from boltzlab.cli.main import main; main()",
        "train",
        "--data",
        "digits",
        "--hidden",
        "4",
        "--epochs",
        "20",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = [
        subprocess.Popen(
            [*command, "--out", str(out), "--seed", str(seed)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (7, 8)
    ]
    outcomes = [(run.wait(timeout=240), run.stderr.read()) for run in runs]  # type: ignore[union-attr]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 1], outcomes
    refused = next(text for code, text in outcomes if code == 1)
    assert "in use by another run" in refused or "already holds a run" in refused
    winner = next(seed for (code, _), seed in zip(outcomes, (7, 8), strict=True) if code == 0)
    assert f"seed = {winner}" in (out / "config.toml").read_text()
    run_ids = {
        load_checkpoint(path).metadata["run"]
        for path in (out / "checkpoints").glob("checkpoint-*.safetensors")
    }
    assert run_ids == {read_run_id(out)}
    assert not (out / LOCK_NAME).exists()

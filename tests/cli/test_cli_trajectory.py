"""The training trajectory through the command line: recorded by ``train``, used by ``logz``,
``evaluate`` and ``sample --sampler ptt``.

Properties checked: ``boltzlab train`` writes ``trajectory.safetensors`` beside the model (the
snapshots ``bl.train`` would record) unless ``--snapshots 0``; ``logz --method trajectory-ais``
finds it in the run directory and its estimate is the library call's with the same seed, and
lands within 4 standard errors of the exact log Z of the tiny model; ``logz --method
trajectory-rts`` and ``trajectory-mbar`` are the library calls with the same flags; ``evaluate``
adds ``trajectory-ais`` to its default methods exactly when the run has a trajectory; ``sample
--sampler ptt`` takes its levels from the run directory; a missing trajectory or a flag that
does not apply is one clear error line.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.models.trajectory import TRAJECTORY_FILE, Trajectory

LOG_Z_LINE = re.compile(r"log Z = (-?[0-9.]+) ± ([0-9.]+)")


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny binary .npz dataset: 40 train and 10 test examples of 2×4 images."""
    generator = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    images = (generator.random((50, 2, 4)) < 0.4).astype(np.uint8)
    np.savez(path, x_train=images[:40], x_test=images[40:])
    return path


def _train(out: Path, data_file: Path, *extra: str) -> Result:
    return invoke(
        "train",
        "--data",
        data_file,
        "--hidden",
        3,
        "--algorithm",
        "pcd",
        "--chains",
        9,
        "--batch-size",
        10,
        "--updates",
        80,
        "--learning-rate",
        0.2,
        "--out",
        out,
        *extra,
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, data_file: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "pcd"
    result = _train(out, data_file)
    assert result.exit_code == 0, result.output
    return out


def test_train_writes_the_trajectory_beside_the_model(run_dir: Path, data_file: Path, tmp_path: Path) -> None:
    trajectory = Trajectory.load(run_dir / TRAJECTORY_FILE)
    model = bl.RBM.load(run_dir / "model.safetensors")
    assert trajectory.ends_at(model) and trajectory.updates.tolist()[:3] == [-1, 0, 1]
    assert int(trajectory.updates[-1]) == 80
    bare = _train(tmp_path / "bare", data_file, "--snapshots", "0")
    assert bare.exit_code == 0, bare.output
    assert not (tmp_path / "bare" / TRAJECTORY_FILE).exists()
    assert "snapshots = 0" in (tmp_path / "bare" / "config.toml").read_text()


@pytest.mark.slow
def test_logz_trajectory_ais_reads_the_run_directory(run_dir: Path) -> None:
    model_path = run_dir / "model.safetensors"
    result = invoke("logz", model_path, "--method", "trajectory-ais", "--chains", 64, "--seed", 2)
    assert result.exit_code == 0, result.output
    log_z, stderr = (float(group) for group in LOG_Z_LINE.search(result.stdout).groups())
    model = bl.RBM.load(model_path)
    library = bl.estimate_log_z(
        model, method="trajectory-ais", trajectory=run_dir, n_chains=64, generator=2, lower_bound_sweeps=200
    )
    assert f"{library.log_z:.6f}" == f"{log_z:.6f}"
    assert abs(log_z - bl.exact_log_z(model)) < 4.0 * stderr
    assert "path: " in result.stdout and "steps" in result.stdout


@pytest.mark.slow
def test_logz_and_evaluate_refuse_what_does_not_fit(run_dir: Path, tmp_path: Path) -> None:
    lonely = tmp_path / "model.safetensors"
    bl.RBM.load(run_dir / "model.safetensors").save(lonely)
    assert_one_line_error(invoke("logz", lonely, "--method", "trajectory-ais"), "--trajectory PATH")
    assert_one_line_error(
        invoke("logz", run_dir / "model.safetensors", "--method", "ais", "--trajectory", run_dir),
        "--trajectory",
    )
    assert_one_line_error(
        invoke("logz", run_dir / "model.safetensors", "--method", "trajectory-ais", "--schedule", "linear"),
        "--schedule",
    )
    with_path = invoke("logz", lonely, "--method", "trajectory-ais", "--trajectory", run_dir, "--chains", 16)
    assert with_path.exit_code == 0, with_path.output


@pytest.mark.slow
def test_evaluate_adds_trajectory_ais_when_the_run_has_a_trajectory(
    run_dir: Path, data_file: Path, tmp_path: Path
) -> None:
    def methods_of(result: Result) -> list[str]:
        known = bl.estimators.methods()
        table = result.output.split("verdict")[1] if "verdict" in result.output else result.output
        return [line.split()[0] for line in table.splitlines() if line.split() and line.split()[0] in known]

    common = ["--data", data_file, "--budget", 50, "--chains", 16, "--examples", 2]
    with_run = invoke("evaluate", run_dir / "model.safetensors", *common)
    assert with_run.exit_code == 0, with_run.output
    assert methods_of(with_run)[:6] == ["exact", "ais", "anchored-ais", "trajectory-ais", "raise", "rts"]
    assert "trajectory-rts" not in methods_of(with_run)  # on request only (docs/trust.md)
    lonely = tmp_path / "model.safetensors"
    bl.RBM.load(run_dir / "model.safetensors").save(lonely)
    alone = invoke("evaluate", lonely, *common)
    assert alone.exit_code == 0, alone.output
    assert not {"trajectory-ais", "trajectory-rts"} & set(methods_of(alone))
    asked = invoke("evaluate", lonely, *common, "--methods", "exact,trajectory-rts")
    assert_one_line_error(asked, "need the training trajectory", "--trajectory PATH")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["trajectory-rts", "trajectory-mbar"])
def test_logz_tempers_along_the_trajectory(run_dir: Path, method: str) -> None:
    model_path = run_dir / "model.safetensors"
    flags = ["--chains", 20, "--temperatures", 12, "--sweeps", 200, "--seed", 1]
    result = invoke("logz", model_path, "--method", method, *flags)
    assert result.exit_code == 0, result.output
    log_z, stderr = (float(group) for group in LOG_Z_LINE.search(result.stdout).groups())
    model = bl.RBM.load(model_path)
    library = bl.estimate_log_z(
        model, method=method, trajectory=run_dir, n_chains=20, n_levels=12, n_sweeps=200, generator=1
    )
    assert f"{library.log_z:.6f}" == f"{log_z:.6f}"
    assert abs(log_z - bl.exact_log_z(model)) < 4.0 * stderr
    assert "levels along the training trajectory" in result.stdout
    assert_one_line_error(invoke("logz", model_path, "--method", method, "--operator", "flip"), "--operator")


def test_sample_ptt_takes_its_levels_from_the_run(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ptt.png"
    model_path = run_dir / "model.safetensors"
    result = invoke(
        "sample",
        model_path,
        "--sampler",
        "ptt",
        "--chains",
        2,
        "--sweeps",
        20,
        "--keep-every",
        10,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    n_levels = Trajectory.load(run_dir).n_points  # every point; the last is the model itself
    assert f"over {n_levels} training snapshots" in result.output
    assert (tmp_path / "ptt-temperatures.png").is_file()
    assert_one_line_error(
        invoke("sample", model_path, "--sampler", "ptt", "--levels", 4, "--out", out), "--levels", "ptt"
    )
    assert_one_line_error(
        invoke("sample", model_path, "--sampler", "pt", "--trajectory", run_dir, "--out", out), "--trajectory"
    )
    lonely = tmp_path / "model.safetensors"
    bl.RBM.load(model_path).save(lonely)
    assert_one_line_error(
        invoke("sample", lonely, "--sampler", "ptt", "--out", out), "trajectory.safetensors"
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["logz", "evaluate"])
def test_rts_and_mbar_get_the_runs_trajectory_as_their_second_route(
    run_dir: Path, data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # What each method is handed: rts and mbar the run's trajectory (estimators/routes.py),
    # the other tempered methods none; a model without a trajectory gives them none.
    from boltzlab.cli import evaluate, logz

    seen: dict[str, object] = {}
    real = logz.run_quietly

    def spy(model, method, *, seed, options, progress=None):
        seen[method] = options.get("trajectory")
        return real(model, method, seed=seed, options=options, progress=progress)

    monkeypatch.setattr(logz, "run_quietly", spy)
    monkeypatch.setattr(evaluate, "run_quietly", spy)
    lonely = tmp_path / "model.safetensors"
    bl.RBM.load(run_dir / "model.safetensors").save(lonely)
    for model_path, has_trajectory in ((run_dir / "model.safetensors", True), (lonely, False)):
        seen.clear()
        for method in ("rts", "mbar", "ts"):
            if command == "logz":
                result = invoke(
                    "logz", model_path, "--method", method, "--data", data_file, "--sweeps", 20, "--chains", 8
                )
            else:
                result = invoke(
                    "evaluate",
                    model_path,
                    "--data",
                    data_file,
                    "--methods",
                    method,
                    "--budget",
                    200,
                    "--chains",
                    8,
                )
            assert result.exit_code == 0, (method, result.output)
        assert (seen["rts"] is not None, seen["mbar"] is not None) == (has_trajectory, has_trajectory)
        assert seen["ts"] is None

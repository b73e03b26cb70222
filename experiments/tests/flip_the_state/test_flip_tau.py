"""τ of flip against Gibbs on model files (``--model-file``; Brügge, Fischer & Igel 2013).

Properties checked: on a tiny RBM saved to a file, ``boltzlab reproduce flip-the-state
--model-file`` writes the τ table (Sokal and AR, standard errors, reliable flags, flip rates),
the autocorrelation functions (CSV and PNG) and a summary that says whether the paper's
17.28 % held, with the training read from the file; a non-RBM file and options that size the
study's own parts are refused in one line; the same seed gives the same numbers and Gibbs and
flip start from the same states; the paper verdict follows the numbers; the blocks of chains
cover every chain once on any number of processes, and two real processes sharing the chains
give the numbers of one.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab import distributed
from boltzlab.errors import ValidationError
from boltzlab.io import save_model
from boltzlab_experiments.flip_the_state.command import sized_mixing
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.findings import PAPER_TAU_GAIN, paper_gain_finding
from boltzlab_experiments.flip_the_state.mixing import MixingResult
from boltzlab_experiments.flip_the_state.model_files import (
    ModelFileMixingConfig,
    load_rbm,
    local_chains,
    run_model_file_mixing,
    training_label,
)
from boltzlab_experiments.flip_the_state.tau_command import model_names

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# Seconds of sampling on a 12×6 RBM: 8 chains, a short burn-in, a few hundred sweeps.
SMALL = [
    "--init",
    "base",
    "--chains",
    "8",
    "--steps",
    "400",
    "--burn-in",
    "10",
    "--max-lag",
    "20",
    "--blocks",
    "4",
]


def _tiny_rbm(path: Path, *, n_visible: int = 12, scale: float = 100.0) -> Path:
    """A 12×6 RBM with weights large enough that the chains are correlated, saved with the
    training metadata ``boltzlab train`` would record."""
    model = bl.RBM(n_visible=n_visible, n_hidden=6, generator=3)
    with torch.no_grad():
        model.weights.mul_(scale)
    training = {"algorithm": "pcd", "k": 1, "n_updates": 10}
    return save_model(model, path, metadata={"training": training})


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    return _tiny_rbm(tmp_path / "tiny" / "model.safetensors")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_model_file_run_writes_the_tau_table_figure_and_summary(
    model_file: Path, tmp_path: Path, reproduce
) -> None:
    out = tmp_path / "tau"
    result = reproduce(
        "flip-the-state", "--parts", "mixing", "--model-file", model_file, *SMALL, "--out", out
    )
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in out.iterdir()) == [
        "mixing-acf.csv",
        "mixing.csv",
        "mixing.md",
        "mixing.png",
        "summary.md",
    ]
    rows = _rows(out / "mixing.csv")
    assert [(row["model"], row["operator"]) for row in rows] == [
        ("model.safetensors", "gibbs"),
        ("model.safetensors", "flip"),
    ]
    for row in rows:
        for method in ("sokal", "ar"):
            assert float(row[f"tau_{method}"]) > 0 and float(row[f"tau_{method}_stderr"]) > 0
            assert row[f"{method}_reliable"] in ("True", "False")
        assert 0 < float(row["flip_rate"]) <= 1 and float(row["seconds"]) > 0
    # Flip changes a unit at least as often as Gibbs: that is what the operator is for.
    assert float(rows[1]["flip_rate"]) >= float(rows[0]["flip_rate"])
    acf = _rows(out / "mixing-acf.csv")
    assert len(acf) == 2 * 21 and {row["lag"] for row in acf if row["autocorrelation"] == "1"} == {"0"}
    assert (out / "mixing.png").read_bytes().startswith(PNG_MAGIC)
    summary = (out / "summary.md").read_text(encoding="utf-8")
    held = f"The paper's {PAPER_TAU_GAIN:.2%} held here" in summary
    assert held or f"The paper's {PAPER_TAU_GAIN:.2%} did not hold here" in summary
    assert (
        "training PCD-1, 10 updates" in summary
        and "there 24 MNIST RBMs 784×500 trained with 20-PT10" in summary
    )
    assert "8 chains per model and operator" in summary and "run on 1 process" in summary
    assert "| model.safetensors |" in (out / "mixing.md").read_text(encoding="utf-8")
    # The same seed gives the same numbers.
    again = reproduce("flip-the-state", "--model-file", model_file, *SMALL, "--out", tmp_path / "again")
    assert again.exit_code == 0, again.output
    tau_columns = ["tau_sokal", "tau_ar", "flip_rate"]
    assert [[row[c] for c in tau_columns] for row in _rows(tmp_path / "again" / "mixing.csv")] == [
        [row[c] for c in tau_columns] for row in rows
    ]


def test_bad_files_and_options_are_one_line_errors(model_file: Path, tmp_path: Path, reproduce) -> None:
    dbm = save_model(bl.DBM([6, 4, 3], generator=0), tmp_path / "dbm.safetensors")
    wide = _tiny_rbm(tmp_path / "wide.safetensors", n_visible=13)
    cases = [
        (["--model-file", dbm, *SMALL], "holds a DBM, not an RBM"),
        (["--model-file", model_file, "--parts", "slem", *SMALL], "--model-file measures τ only"),
        (["--model-file", model_file, "--tiny", *SMALL], "--full and --tiny size the study's own RBMs"),
        (["--model-file", model_file, "--model-file", wide, *SMALL], "the same layer sizes"),
        (
            ["--model-file", model_file, *SMALL, "--chains", "2"],
            "--blocks must be between 1 and the 2 chains",
        ),
        (["--blocks", "2"], "--blocks applies with --model-file only"),
        (["--model-file", tmp_path / "missing.safetensors", *SMALL], "missing.safetensors"),
    ]
    for args, message in cases:
        bad = reproduce("flip-the-state", *args, "--out", tmp_path / "x")
        assert bad.exit_code == 1, bad.output
        assert bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1, bad.stderr
        assert message in bad.stderr, bad.stderr
    with pytest.raises(ValidationError, match="not an RBM"):
        load_rbm(dbm)


def test_the_sizing_options_also_resize_the_studys_own_mixing_part() -> None:
    tiny = FlipTheStateConfig.tiny()
    sized = sized_mixing(tiny, chains=5, steps=None, burn_in=0, max_lag=7)
    assert (sized.mixing_chains, sized.mixing_steps, sized.mixing_burn_in, sized.mixing_max_lag) == (
        5,
        tiny.mixing_steps,
        0,
        7,
    )


def test_measurement_is_reproducible_and_pairs_the_operators(model_file: Path, tmp_path: Path) -> None:
    other = _tiny_rbm(tmp_path / "other" / "model.safetensors", scale=300.0)
    models = [load_rbm(model_file), load_rbm(other)]
    names = model_names([model_file, other])
    assert names == ["tiny/model.safetensors", "other/model.safetensors"]
    assert training_label(models[0]) == "PCD-1, 10 updates" and training_label(bl.RBM(3, 2)) == "not recorded"
    config = ModelFileMixingConfig(n_chains=6, n_steps=300, burn_in=5, max_lag=400, blocks=3, init="base")
    seen: list[tuple[int, int]] = []
    result = run_model_file_mixing(
        models, names, config, generator=4, progress=lambda done, total, _: seen.append((done, total))
    )
    assert result.tau.shape == (2, 2, 2) and result.model_names == tuple(names)
    assert result.layer_sizes == (12, 6) and result.seconds is not None and bool((result.seconds > 0).all())
    # Lags past the chain length are NaN; lag 0 is 1.
    assert bool((result.autocorrelation[..., 0] == 1).all())
    assert bool(result.autocorrelation[..., 300:].isnan().all()) and not bool(
        result.autocorrelation[..., :300].isnan().any()
    )
    gain, stderr = result.gain("ar")
    assert torch.allclose(gain, 1 - result.tau[:, 1, 1] / result.tau[:, 0, 1]) and bool((stderr > 0).all())
    # The progress counts sweeps over every run and ends at the total.
    total = 2 * 2 * (config.burn_in + config.n_steps)
    assert seen[-1] == (total, total) and all(done <= total for done, _ in seen)
    again = run_model_file_mixing(models, names, config, generator=4)
    assert torch.equal(again.tau, result.tau) and torch.equal(again.flip_rate, result.flip_rate)
    # Starting from data: the rows must have the models' visible units.
    data = (torch.rand(20, 12, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    from_data = run_model_file_mixing(
        models[:1], names[:1], dataclasses.replace(config, init="data"), data=data, generator=4
    )
    assert bool(torch.isfinite(from_data.tau).all())
    with pytest.raises(ValidationError, match="--init base"):
        run_model_file_mixing(
            models[:1], names[:1], ModelFileMixingConfig(n_chains=6, blocks=3), data=data[:, :5]
        )
    with pytest.raises(ValidationError, match="--steps must be at least 3"):
        ModelFileMixingConfig(n_steps=2)


def _mixing(gain: float, stderr: float) -> MixingResult:
    """One model whose AR and Sokal gains are ``gain`` with τ_Gibbs = 10 and a relative error
    that makes the gain's delta-method error about ``stderr``."""
    tau = torch.tensor([[[10.0, 10.0], [10.0 * (1 - gain)] * 2]], dtype=torch.float64)
    relative = stderr / (1 - gain) / 2**0.5
    return MixingResult(
        operators=("gibbs", "flip"),
        methods=("sokal", "ar"),
        layer_sizes=(784, 500),
        n_steps=50_000,
        n_chains=100,
        tau=tau,
        tau_stderr=relative * tau,
        reliable=torch.ones(1, 2, 2, dtype=torch.bool),
        autocorrelation=torch.ones(1, 2, 3, dtype=torch.float64),
        flip_rate=torch.tensor([[0.09, 0.12]], dtype=torch.float64),
        weight_scale=torch.tensor([0.09], dtype=torch.float64),
        model_names=("model.safetensors",),
    )


def test_the_paper_verdict_follows_the_numbers() -> None:
    held = paper_gain_finding(_mixing(0.16, 0.01))
    assert held.verdict == "confirmed" and held.text.startswith("The paper's 17.28% held here")
    assert "+16.00% ± 1.00%" in held.text
    below = paper_gain_finding(_mixing(0.05, 0.01))
    assert below.verdict == "contradicted" and below.text.startswith("The paper's 17.28% did not hold here")
    assert "more than two standard errors below 17.28%" in below.text
    above = paper_gain_finding(_mixing(0.40, 0.01))
    assert above.verdict == "contradicted" and "above 17.28%" in above.text


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_blocks_of_chains_cover_every_chain_once(world: int) -> None:
    ranks = [distributed.Topology(world_size=world, rank=rank, active=world > 1) for rank in range(world)]
    assert sum(local_chains(10, 4, where) for where in ranks) == 10
    assert all(local_chains(10, 4, where) > 0 for where in ranks)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow  # a real 2-process gloo group (the slow tier, like tests/distributed)
def test_two_processes_share_the_chains_and_give_the_numbers_of_one(model_file: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "boltzlab_experiments.flip_the_state.tau_command"]
    args = ["--model-file", str(model_file), *SMALL, "--seed", "5"]
    base_env = {**os.environ, "OMP_NUM_THREADS": "1", "BOLTZLAB_DIST_TIMEOUT": "60"}
    alone = subprocess.run(
        [*command, *args, "--out", str(tmp_path / "one")],
        env=base_env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert alone.returncode == 0, alone.stderr
    port = str(_free_port())
    processes = [
        subprocess.Popen(
            [*command, *args, "--out", str(tmp_path / "two")],
            env={
                **base_env,
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        outcomes = [process.communicate(timeout=180) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert [process.returncode for process in processes] == [0, 0], outcomes
    assert "wrote" in outcomes[0][0] and outcomes[1][0] == ""  # rank 0 alone prints and writes
    shared = ["model", "operator", "flip_rate", "tau_sokal", "tau_sokal_stderr", "tau_ar", "tau_ar_stderr"]
    one, two = _rows(tmp_path / "one" / "mixing.csv"), _rows(tmp_path / "two" / "mixing.csv")
    assert [[row[c] for c in shared] for row in two] == [[row[c] for c in shared] for row in one]
    assert (tmp_path / "two" / "mixing-acf.csv").read_text() == (
        tmp_path / "one" / "mixing-acf.csv"
    ).read_text()
    assert "run on 2 processes" in (tmp_path / "two" / "summary.md").read_text(encoding="utf-8")

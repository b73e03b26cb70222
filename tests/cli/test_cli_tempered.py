"""``boltzlab train`` with every learning algorithm and ``boltzlab sample`` with every sampler.

Properties checked: ``--algorithm`` accepts every registered negative phase and each trains a
few updates through the command line, writing the run directory; the phase options reach the
trainer (``--levels``, ``--lag``, ``--fast-learning-rate``, ``--fast-decay`` become the phase's
settings and are recorded in ``config.toml``) and are refused, in one line, for algorithms that do not use them;
``--sampler`` accepts every registered sampler, tempered samplers also write the temperature
PNG and print a summary line, their samples are those of one ``bl.sample`` call with the same
seed and ladder, and ``--levels``/``--low`` become the ladder the sampler was meant to get.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.cli.sample import ladder_options
from boltzlab.cli.train import algorithm_params
from boltzlab.errors import ValidationError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALGORITHMS = ("ast", "cast", "cd", "fpcd", "pcd", "pt", "trans-sap")
SAMPLERS = ("ast", "cast", "plain", "pt", "st", "tt")
# Options per algorithm that exercise its own flags (small ladders, short lag).
ALGORITHM_FLAGS = {
    "pt": ["--levels", "3"],
    "ast": ["--levels", "3"],
    "cast": ["--levels", "4", "--lag", "2"],
    "trans-sap": ["--levels", "3"],
    "fpcd": ["--fast-learning-rate", "0.02", "--fast-decay", "0.9"],
}


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
    """A tiny binary .npz dataset: 30 train examples of 2×3 images."""
    generator = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    np.savez(path, x_train=(generator.random((30, 2, 3)) < 0.4).astype(np.uint8))
    return path


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory, data_file: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "pcd"
    result = invoke(
        "train",
        "--data",
        data_file,
        "--hidden",
        4,
        "--algorithm",
        "pcd",
        "--chains",
        7,
        "--batch-size",
        10,
        "--updates",
        30,
        "--learning-rate",
        0.5,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    return out / "model.safetensors"


def test_every_registered_algorithm_is_offered() -> None:
    assert set(ALGORITHMS) <= set(bl.training.available_phases())
    assert set(SAMPLERS) <= set(bl.sampling.samplers())
    help_text = " ".join(invoke("train", "--help").output.split())
    for name in ALGORITHMS:
        assert name in help_text


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", bl.training.available_phases())
def test_every_algorithm_trains_through_the_cli(tmp_path: Path, data_file: Path, algorithm: str) -> None:
    out = tmp_path / algorithm
    flags = ALGORITHM_FLAGS.get(algorithm, [])
    result = invoke(
        "train",
        "--data",
        data_file,
        "--hidden",
        3,
        "--algorithm",
        algorithm,
        *flags,
        "--operator",
        "flip",
        *([] if algorithm in ("cd", "pl") else ["--chains", 5]),  # cd, pl keep no chains: refuse --chains
        "--batch-size",
        10,
        "--updates",
        4,
        "--log-every",
        2,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "trained to update 4 " in result.output
    for name in ("config.toml", "metrics.csv", "model.safetensors", "plots/training.png"):
        assert (out / name).exists(), name
    recorded = bl.RBM.load(out / "model.safetensors")
    assert recorded.layer_sizes == (6, 3)
    recorded_options = (out / "config.toml").read_text()
    assert f'algorithm = "{algorithm}"' in recorded_options
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        assert f"{flag.removeprefix('--').replace('-', '_')} = {value}" in recorded_options


def test_phase_flags_become_algorithm_params() -> None:
    assert algorithm_params("cast", {"levels": 4, "lag": 2}) == {"n_levels": 4, "lag": 2}
    assert algorithm_params("fpcd", {"fast_learning_rate": 0.1, "fast_decay": 0.5}) == {
        "fast_learning_rate": 0.1,
        "fast_decay": 0.5,
    }
    assert algorithm_params("pcd", {"levels": None, "lag": None}) == {}
    # The params reach the phase: CAST with the given ladder size and lag.
    phase = bl.training.get_phase(
        "cast",
        operator=bl.operators.get("gibbs"),
        k=1,
        n_chains=3,
        **algorithm_params("cast", {"levels": 4, "lag": 2}),
    )
    assert phase.describe()["n_levels"] == 4 and phase.describe()["lag"] == 2


@pytest.mark.parametrize(
    ("algorithm", "flags", "fragment"),
    [
        ("pcd", ["--lag", "3"], "--lag applies to --algorithm cast"),
        ("cd", ["--levels", "4"], "--levels applies to --algorithm pt or ast or cast or trans-sap"),
        ("pt", ["--fast-decay", "0.5"], "--fast-decay applies to --algorithm fpcd"),
        ("cast", ["--fast-learning-rate", "0.1"], "not 'cast'"),
        ("sapx", [], "--algorithm must be one of"),
    ],
)
def test_unknown_combinations_are_one_line_errors(
    tmp_path: Path, data_file: Path, algorithm: str, flags: list[str], fragment: str
) -> None:
    result = invoke(
        "train",
        "--data",
        data_file,
        "--hidden",
        3,
        "--algorithm",
        algorithm,
        *flags,
        "--updates",
        2,
        "--batch-size",
        10,
        "--out",
        tmp_path / "run",
    )
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("sampler", bl.sampling.samplers())
def test_every_sampler_writes_its_pngs(tmp_path: Path, model_file: Path, sampler: str) -> None:
    out = tmp_path / f"{sampler}.png"
    result = invoke(
        "sample",
        model_file,
        "--sampler",
        sampler,
        "--operator",
        "flip",
        "--chains",
        3,
        "--sweeps",
        30,
        "--keep-every",
        10,
        "--seed",
        5,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG_MAGIC)
    temperatures = tmp_path / f"{sampler}-temperatures.png"
    if sampler == "plain":
        assert not temperatures.exists()
        return
    assert temperatures.read_bytes().startswith(PNG_MAGIC)
    assert f"wrote {temperatures}" in result.output
    summary_line = next(line for line in result.output.splitlines() if line.startswith(f"{sampler}: "))
    assert ("acceptance" in summary_line) and ("%" in summary_line)
    # The frozen samplers say what learning their weights cost; the others learn none.
    adaptation = [line for line in result.output.splitlines() if line.startswith("adaptation: ")]
    if sampler in ("st", "ast", "cast"):
        assert len(adaptation) == 1 and "chain-sweeps incl. a" in adaptation[0], result.output
    else:
        assert adaptation == []


def test_tempered_samples_are_one_library_call(tmp_path: Path, model_file: Path) -> None:
    out = tmp_path / "pt.png"
    result = invoke(
        "sample",
        model_file,
        "--sampler",
        "pt",
        "--levels",
        4,
        "--low",
        0.25,
        "--chains",
        3,
        "--sweeps",
        40,
        "--keep-every",
        5,
        "--seed",
        9,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    model = bl.RBM.load(model_file)
    library = bl.sample(
        model,
        sampler="pt",
        n_chains=3,
        n_sweeps=40,
        keep_every=5,
        generator=9,
        ladder=bl.tempering.ladders.uniform(4, low=0.25),
    )
    betas = library.info.summary.betas
    assert torch.allclose(betas, torch.tensor([0.25, 0.5, 0.75, 1.0], dtype=torch.float64))
    rates = library.info.summary.swap_acceptance
    shown = f"swap acceptance per pair {float(rates.min()):.1%} to {float(rates.max()):.1%}"
    assert shown in result.output


def test_ladder_flags_map_to_each_sampler() -> None:
    assert ladder_options("pt", None, None) == {}
    assert ladder_options("st", 6, None) == {"n_levels": 6}
    assert ladder_options("cast", 6, 0.8) == {"low": 0.8, "n_levels": 6}
    assert ladder_options("ast", None, 0.5) == {"low": 0.5}
    assert ladder_options("st", None, 0.5) == {"low": 0.5}  # st places its ladder too
    ladder = ladder_options("tt", None, 0.5)["ladder"]
    assert ladder.size == 10 and float(ladder.betas[0]) == 0.5 and float(ladder.betas[-1]) == 1.0
    with pytest.raises(ValidationError, match="--low applies to tempered samplers"):
        ladder_options("plain", None, 0.5)


def test_temperature_figure_refuses_other_summaries() -> None:
    from boltzlab.plotting.tempering import tempered_sampler_figure

    with pytest.raises(
        ValidationError, match="summary must be the summary of a pt, ptt, st, ast, cast or tt run"
    ):
        tempered_sampler_figure(object())


def test_sampler_errors_are_one_line(tmp_path: Path, model_file: Path) -> None:
    assert_one_line_error(
        invoke("sample", model_file, "--sampler", "gibbs", "--out", tmp_path / "x.png"),
        "--sampler must be one of",
        "got 'gibbs'",
    )
    assert_one_line_error(
        invoke("sample", model_file, "--levels", 4, "--out", tmp_path / "x.png"),
        "--levels applies to tempered samplers",
    )

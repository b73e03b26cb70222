"""``info --json`` and ``sample --json``: one JSON object on stdout and nothing else.

Properties checked: stdout parses as a single JSON object (any other line on stdout would make
``json.loads`` fail); ``info`` reports the kind, sizes, dtype, parameter count and statistics,
metadata and exact log Z of the file it read (the library's own values) and the file's size
and SHA-256; ``sample`` reports the files it wrote (which exist), the samples' shape, sampler,
operator, settings, seed, timing and, for every tempered sampler, its verdict, its summary
line and its per-pair or per-level diagnostics; an error under ``--json`` is still one line on
stderr with nothing on stdout.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.sampling import samplers

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
N_VISIBLE, N_HIDDEN = 9, 3  # 3×3 images
N_CHAINS, N_SWEEPS, KEEP_EVERY = 5, 40, 10


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def one_object(result: Result) -> dict:
    """The single JSON object on stdout (``json.loads`` refuses anything around it)."""
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert isinstance(record, dict)
    return record


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny trained RBM run (model.safetensors and trajectory.safetensors for ptt)."""
    generator = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("json")
    data = folder / "tiny.npz"
    np.savez(
        data,
        x_train=(generator.random((40, 3, 3)) < 0.3).astype(np.uint8),
        x_test=(generator.random((11, 3, 3)) < 0.3).astype(np.uint8),
    )
    out = folder / "run"
    result = invoke(
        "train", "--data", data, "--hidden", N_HIDDEN, "--algorithm", "pcd", "--chains", 13,
        "--batch-size", 10, "--updates", 20, "--learning-rate", 0.1, "--seed", 3, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_info_json_describes_the_file(run_dir: Path) -> None:
    path = run_dir / "model.safetensors"
    record = one_object(invoke("info", path, "--json"))
    model = bl.RBM.load(path)
    assert record["file"] == str(path) and record["bytes"] == path.stat().st_size
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert record["format"] == "boltzlab-model" and record["format_version"] == 1
    assert (record["kind"], record["class"]) == ("rbm", "RBM")
    assert record["layer_sizes"] == [N_VISIBLE, N_HIDDEN] and record["dtype"] == "float32"
    assert record["base"] == "base-rate" and record["base_fitted"] is True
    assert record["n_parameters"] == N_VISIBLE * N_HIDDEN + N_VISIBLE + N_HIDDEN
    by_name = {parameter["name"]: parameter for parameter in record["parameters"]}
    assert by_name["weights"]["shape"] == [N_VISIBLE, N_HIDDEN] and by_name["weights"]["numel"] == 27
    weights = model.weights.detach().to(torch.float64)
    assert by_name["weights"]["max"] == float(weights.max())
    assert by_name["weights"]["norm"] == pytest.approx(float(torch.linalg.vector_norm(weights)))
    assert record["metadata"] == json.loads(json.dumps(model.metadata))
    assert record["metadata"]["training"]["algorithm"] == "pcd"
    assert record["exact"]["log_z"] == pytest.approx(bl.exact_log_z(model))
    assert record["exact"]["units_enumerated"] == N_HIDDEN and record["exact"]["reason"] is None


def test_info_json_says_why_exact_log_z_was_not_computed(tmp_path: Path) -> None:
    path = bl.DBM(layer_sizes=[30, 28, 27], generator=0, dtype=torch.float64).save(
        tmp_path / "dbm.safetensors"
    )
    record = one_object(invoke("info", path, "--json"))
    assert (record["kind"], record["layer_sizes"], record["dtype"]) == ("dbm", [30, 28, 27], "float64")
    assert record["base"] == "uniform" and record["metadata"] == {}
    assert record["exact"]["log_z"] is None and "at most 2^25" in record["exact"]["reason"]


def sample_json(run_dir: Path, tmp_path: Path, sampler: str, *extra: str | int) -> tuple[dict, Path]:
    out = tmp_path / f"{sampler}.png"
    result = invoke(
        "sample", run_dir / "model.safetensors", "--json", "--sampler", sampler, "--chains", N_CHAINS,
        "--sweeps", N_SWEEPS, "--keep-every", KEEP_EVERY, "--seed", 7, "--out", out, *extra,
    )  # fmt: skip
    return one_object(result), out


def test_sample_json_plain(run_dir: Path, tmp_path: Path) -> None:
    record, out = sample_json(run_dir, tmp_path, "plain", "--operator", "mixture", "--alpha", 0.25)
    assert record["written"] == [str(out)] and out.read_bytes().startswith(PNG_MAGIC)
    assert record["shape"] == [N_SWEEPS // KEEP_EVERY, N_CHAINS, N_VISIBLE]
    assert (record["n_samples"], record["n_chains"]) == (N_SWEEPS // KEEP_EVERY, N_CHAINS)
    assert (record["sampler"], record["operator"], record["seed"]) == ("plain", "mixture", 7)
    # By name and parameters, not as a Python repr ("MixtureOperator(alpha=0.25)").
    assert record["operator_params"] == {"alpha": 0.25} and "operator_repr" not in record
    settings = record["settings"]
    assert (settings["chains"], settings["sweeps"], settings["keep_every"], settings["burn_in"]) == (
        N_CHAINS, N_SWEEPS, KEEP_EVERY, 0,
    )  # fmt: skip
    assert settings["image_shape"] == [3, 3] and settings["out"] == str(out) and settings["alpha"] == 0.25
    assert 0.0 < record["flip_rate"] < 1.0 and record["seconds"] >= 0.0
    assert record["reliable"] is True and record["warnings"] == [] and record["summary"] is None
    assert record["diagnostics"] == {} and record["adaptation"] is None and record["world_size"] == 1


TEMPERED = [name for name in samplers() if name != "plain"]


@pytest.mark.parametrize("sampler", TEMPERED)
def test_sample_json_tempered(run_dir: Path, tmp_path: Path, sampler: str) -> None:
    record, out = sample_json(run_dir, tmp_path, sampler)
    temperatures = out.with_name(f"{out.stem}-temperatures.png")
    assert record["written"] == [str(out), str(temperatures)]
    assert all(Path(path).read_bytes().startswith(PNG_MAGIC) for path in record["written"])
    assert record["sampler"] == sampler and record["shape"] == [N_SWEEPS // KEEP_EVERY, N_CHAINS, N_VISIBLE]
    assert isinstance(record["reliable"], bool) and isinstance(record["warnings"], list)
    assert record["reliable"] == (not record["warnings"])
    assert isinstance(record["summary"], str) and record["flip_rate"] is None
    diagnostics = record["diagnostics"]
    if sampler in ("pt", "ptt"):  # one swap rate per neighbouring pair of levels
        n_levels = len(diagnostics["positions"] if sampler == "ptt" else diagnostics["betas"])
        assert len(diagnostics["swap_acceptance"]) == n_levels - 1
        assert diagnostics["total_round_trips"] == sum(diagnostics["round_trips"])
        assert f"{diagnostics['total_round_trips']} round trips" in record["summary"]
    elif sampler == "tt":
        assert (
            len(diagnostics["acceptance_per_chain"]) == N_CHAINS and 0 <= diagnostics["acceptance_rate"] <= 1
        )
    else:  # st, ast, cast: level moves on a ladder placed and weighted first
        # CAST's fast chains are a nested object, not "fast.occupancy" keys.
        levels = diagnostics["fast"] if sampler == "cast" else diagnostics
        occupancy = levels["occupancy"]
        assert sum(occupancy) == pytest.approx(1.0) and len(occupancy) == record["adaptation"]["n_levels"]
        assert record["adaptation"]["cost_sweeps"] > record["adaptation"]["pilot_sweeps"] > 0
        assert f"{sum(levels['round_trips'])} round trips" in record["summary"]
    if sampler not in ("st", "ast", "cast"):
        assert record["adaptation"] is None
    # ptt's levels are the run's snapshots, found beside the model file by default.
    assert record["settings"]["trajectory"] == (str(run_dir) if sampler == "ptt" else None)


def test_json_errors_stay_one_line_on_stderr(run_dir: Path, tmp_path: Path) -> None:
    for args in (
        ("sample", run_dir / "model.safetensors", "--json", "--sweeps", 5, "--keep-every", 10),
        ("info", tmp_path / "absent.safetensors", "--json"),
    ):
        result = invoke(*args)
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1

"""The command line on aligned sequences: train, evaluate, logz and sample with a FASTA file.

Properties checked, on a tiny FASTA written here (90 protein sequences of 9 columns, families of
near-copies): ``train --data family.fasta`` builds a Potts RBM with the file's alphabet, says
how many sequences each split holds and their N_eff, holds out whole families (homology), and
records how it read and split them in the model file; ``evaluate`` reads that record, so it
scores the same held-out sequences without the flags, weights each sequence in the
log-likelihoods (checked against a hand computation with the exact log Z), prints and saves
the generative check (``--json``, ``evaluation.json``, ``plots/correlations.png`` and the
report's samples section); ``logz`` accepts the model and the file; ``sample --format fasta``
writes sequences in the model's alphabet that read back as the samples of one ``bl.sample``
call, and ``.npy`` holds symbol indices; and bad FASTA input and misplaced flags end in one
readable line each (exit status 1, no traceback).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.cli.run_report import write_report
from boltzlab.cli.sample import _run_plain
from boltzlab.data.sequence_dataset import SequenceDataset

SYMBOLS = "ACDEFGHIKLMNPQRSTVWY-"
N_SITES, N_HIDDEN = 9, 4
QUICK_CHECK = ("--check-sweeps", 20, "--check-chains", 6)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    generator = torch.Generator().manual_seed(0)
    records = []
    for family in range(30):
        ancestor = torch.randint(0, 20, (N_SITES,), generator=generator)
        for child in range(3):
            sequence = ancestor.clone()
            sequence[int(torch.randint(0, N_SITES, (1,), generator=generator))] = 20  # a gap
            records.append(f">f{family}c{child}\n{''.join(SYMBOLS[i] for i in sequence)}\n")
    path = tmp_path_factory.mktemp("sequences") / "family.fasta"
    path.write_text("".join(records))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, fasta: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "potts"
    result = invoke(
        "train", "--data", fasta, "--hidden", N_HIDDEN, "--algorithm", "pcd", "--chains", 13,
        "--batch-size", 10, "--updates", 30, "--learning-rate", 0.05, "--identity", 0.7, "--seed", 3,
        "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def test_train_builds_a_potts_rbm_and_reports_the_effective_numbers(run_dir: Path, fasta: Path) -> None:
    model = bl.io.load_model(run_dir / "model.safetensors")
    assert isinstance(model, bl.models.PottsRBM)
    assert (model.n_sites, model.n_states, model.n_hidden) == (N_SITES, 21, N_HIDDEN)
    assert model.alphabet.symbols == SYMBOLS
    record = model.metadata["data"]["sequences"]
    data = bl.data.load(fasta, identity=0.7)
    assert record["identity"] == 0.7 and record["split"] == "homology" and record["test_fraction"] == 0.1
    assert record["n_test"] == data.test.shape[0] and record["effective_train"] == pytest.approx(
        data.effective_number("train"), abs=1e-3
    )
    assert (run_dir / "plots" / "weight_logos.png").is_file()
    assert not (run_dir / "plots" / "samples.png").exists()  # one-hot grids are not what sequence users read


def test_train_says_what_it_held_out_and_how_weights_reach_training(fasta: Path, tmp_path: Path) -> None:
    result = invoke(
        "train", "--data", fasta, "--hidden", 2, "--updates", 2, "--batch-size", 10, "--split", "random",
        "--no-sequence-weights", "--snapshots", 0, "--out", tmp_path / "run",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Potts RBM 9 sites × 21 states × 2 hidden" in result.output
    assert "81 training, 9 test; no sequence weights; held out at random" in result.output
    assert "unweighted: every sequence counts 1" in result.output


def test_evaluate_weights_the_log_likelihoods_and_runs_the_generative_check(
    run_dir: Path, fasta: Path
) -> None:
    model_path = run_dir / "model.safetensors"
    result = invoke("evaluate", model_path, "--data", fasta, "--methods", "exact", *QUICK_CHECK, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    # The model file's record gives the split: the same identity (0.7) without --identity.
    data = bl.data.load(fasta, identity=0.7)
    model = bl.io.load_model(model_path)
    log_z = bl.exact_log_z(model)
    log_f = bl.evaluation.log_unnormalized(model, data.test)
    expected = float((data.test_weights @ log_f) / data.test_weights.sum()) - log_z
    assert payload["rows"][0]["test_log_likelihood"] == pytest.approx(expected, abs=1e-9)
    assert "weighted by 1/(neighbours within identity 0.7)" in payload["likelihood_note"]
    generative = payload["generative"]
    assert generative["n_samples"] == 6 * 20 and generative["weighted"] is True
    assert (
        -1 <= generative["correlations"]["pearson"] <= 1 and generative["frequencies"]["n_values"] == 9 * 21
    )
    # As many draws from the alignment itself (120) score better than the barely trained model.
    assert generative["correlations"]["pearson"] < generative["reference_correlations"]["pearson"]
    assert "pt sampler (10 levels" in generative["sampling"]


def test_evaluate_prints_the_check_and_saves_it_for_the_report(
    run_dir: Path, fasta: Path, tmp_path: Path
) -> None:
    out = tmp_path / "evaluation"
    result = invoke(
        "evaluate", run_dir / "model.safetensors", "--data", fasta, "--methods", "exact", *QUICK_CHECK,
        "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "generative check: 120 samples against the training split's" in result.output
    assert "connected correlations C_ij(a,b), i < j: Pearson r" in result.output
    assert (out / "plots" / "correlations.png").read_bytes().startswith(b"\x89PNG")
    saved = json.loads((out / "evaluation.json").read_text())
    assert saved["generative"]["figure"] == str(out / "plots" / "correlations.png")
    # The run's report shows the check and the logos in its samples section.
    for name in ("model.safetensors", "metrics.csv", "config.toml"):
        (out / name).write_bytes((run_dir / name).read_bytes())
    (out / "plots" / "weight_logos.png").write_bytes((run_dir / "plots" / "weight_logos.png").read_bytes())
    page = write_report(out).read_text()
    samples = page[page.index('id="samples"') : page.index('id="tempering"')]
    assert "Pearson r" in samples and "weight logos" in samples and samples.count("data:image/png") == 2


def test_logz_takes_the_potts_model_and_the_fasta_file(run_dir: Path, fasta: Path) -> None:
    result = invoke("logz", run_dir / "model.safetensors", "--method", "exact", "--data", fasta)
    assert result.exit_code == 0, result.output
    exact = bl.exact_log_z(bl.io.load_model(run_dir / "model.safetensors"))
    assert f"log Z = {exact:.6f} (exact)" in result.output


def test_sample_writes_fasta_that_reads_back_as_one_sample_call(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "samples.fasta"
    args = ("--chains", 5, "--sweeps", 40, "--keep-every", 8, "--burn-in", 3, "--seed", 2)
    result = invoke("sample", run_dir / "model.safetensors", *args, "--out", out)
    assert result.exit_code == 0, result.output
    read = bl.data.read_fasta(out)
    model = bl.io.load_model(run_dir / "model.safetensors")
    options = {"keep_every": 8, "sweeps": 40, "seed": 2, "chains": 5, "burn_in": 3}
    samples, _ = _run_plain(model, options, bl.operators.get("gibbs"), show=False)  # (kept, chains, L·q)
    by_chain = model.to_indices(samples.permute(1, 0, 2).reshape(-1, samples.shape[-1]))
    assert torch.equal(read.sequences, by_chain)
    assert read.names[:2] == ("sample 1 chain=0 sweep=11", "sample 2 chain=0 sweep=19")
    # --format fasta without --out writes samples.fasta; .npy holds symbol indices.
    monkeypatch.chdir(tmp_path)
    assert invoke("sample", run_dir / "model.safetensors", *args, "--format", "fasta").exit_code == 0
    assert bl.data.read_fasta("samples.fasta").sequences.shape == (25, N_SITES)
    assert invoke("sample", run_dir / "model.safetensors", *args, "--out", "s.npy").exit_code == 0
    indices = np.load("s.npy")
    assert indices.shape == (5, 5, N_SITES) and indices.max() < 21


@pytest.fixture(scope="module")
def binary_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bl.RBM(n_visible=N_SITES * 21, n_hidden=3, generator=0).save(
        tmp_path_factory.mktemp("binary") / "rbm.safetensors"
    )


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            ">a\nACDE\n>b\nACXE\n",
            ("line 4, column 3 (b)", "'X' is not in the protein alphabet", "--unknown-as-gap"),
        ),
        (">a\nACDE\n>b\nACD\n", ("line 3 (b): 3 aligned columns, but the first sequence has 4",)),
        ("ACDE\n>a\nACDE\n", ("line 1: sequence text before the first '>name' line",)),
        ("", ("is empty",)),
    ],
    ids=["unknown symbol", "ragged", "no header", "empty"],
)
@pytest.mark.fault("hostile data files")
def test_bad_fasta_is_one_readable_line(tmp_path: Path, text: str, fragments: tuple[str, ...]) -> None:
    path = tmp_path / "bad.fasta"
    path.write_text(text)
    result = invoke("train", "--data", path, "--hidden", 2, "--updates", 1, "--out", tmp_path / "run")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_misplaced_flags_and_mismatched_models_are_one_readable_line(
    run_dir: Path, fasta: Path, binary_model: Path, tmp_path: Path
) -> None:
    npz = tmp_path / "binary.npz"
    np.savez(npz, x_train=np.zeros((4, 6), dtype=np.uint8))
    out = tmp_path / "run"
    cases = [
        (
            ("train", "--data", npz, "--hidden", 2, "--alphabet", "rna", "--out", out),
            ("--alphabet applies to aligned FASTA files", "not --data"),
        ),
        (
            ("train", "--data", fasta, "--hidden", 2, "--binarize", "threshold", "--out", out),
            ("--binarize reads binary data files", "is aligned FASTA"),
        ),
        (
            ("train", "--data", fasta, "--alphabet", "klingon", "--hidden", 2, "--out", out),
            ("unknown alphabet 'klingon'",),
        ),
        (
            ("train", "--data", fasta, "--model", "dbm", "--layers", "189,4,3", "--out", out),
            ("--model dbm takes binary data", "Potts RBM"),
        ),
        (
            ("evaluate", binary_model, "--data", fasta, "--methods", "exact"),
            ("holds aligned sequences, but the model is a RBM of binary units",),
        ),
        (
            (
                "evaluate",
                run_dir / "model.safetensors",
                "--data",
                fasta,
                "--alphabet",
                "custom:-ACDEFGHIKLMNPQRSTVWY",
            ),
            ("is not the model's protein alphabet",),
        ),
        (
            (
                "sample",
                binary_model,
                "--format",
                "fasta",
                "--sweeps",
                5,
                "--keep-every",
                5,
                "--out",
                tmp_path / "s.fa",
            ),
            ("FASTA holds sequences, and the model is a RBM of binary units",),
        ),
        (
            ("sample", run_dir / "model.safetensors", "--format", "fasta", "--out", tmp_path / "s.png"),
            ("--format fasta but --out", "names .png"),
        ),
    ]
    for args, fragments in cases:
        assert_one_line_error(invoke(*args), *fragments)
    assert not out.exists() or not (out / "model.safetensors").exists()


def test_the_dataset_the_commands_read_is_a_sequence_dataset(fasta: Path) -> None:
    """--data resolves through bl.data.load: every command gets the alignment with its weights."""
    from boltzlab.cli.common import load_data

    data = load_data(str(fasta), root=None, seed=0, options={"identity": 0.7}, recorded={"split": "random"})
    assert isinstance(data, SequenceDataset) and data.split == "random" and data.identity == 0.7

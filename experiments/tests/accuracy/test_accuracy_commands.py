"""``boltzlab reproduce rts-vs-ais | estimators-vs-k | varopt --tiny``.

Properties checked: each writes its tables, PNG and a ``summary.md`` whose verdict is the one
it printed (the finding computed from the numbers, :mod:`boltzlab_experiments.accuracy`), and a
second run reuses the cached models instead of training them again. The two RTS-paper commands
run on a saved RBM (``--model-file``) scored against a given reference log Z and its s.e.,
train nothing, and say "reference (± s.e.)" where they would say "exact"; incomplete or
contradictory reference options, and a model as wide as the data is not, are refused with a
usage error naming the option.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from boltzlab.estimators.exact import exact_log_z
from boltzlab_experiments.accuracy.models import TrainingConfig, train_benchmark_model
from boltzlab_experiments.findings import VERDICT_WORDS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def benchmark_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 16-variable dataset for the tiny accuracy benchmarks (4 hidden units each)."""
    generator = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("bench") / "bench.npz"
    marginals = np.linspace(0.1, 0.6, 16)
    np.savez(
        path,
        x_train=(generator.random((120, 16)) < marginals).astype(np.uint8),
        x_test=(generator.random((20, 16)) < marginals).astype(np.uint8),
    )
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "files"),
    [
        ("rts-vs-ais", ["rts-vs-ais.png", "rts-vs-ais.csv", "rts-vs-ais-statistics.csv", "rts-vs-ais.md"]),
        ("estimators-vs-k", ["estimators-vs-k.png", "estimators-vs-k.csv", "estimators-vs-k.md"]),
        ("varopt", ["varopt.png", "varopt.csv", "varopt.md"]),
    ],
)
def test_reproduce_tiny_writes_tables_plot_and_summary(
    command: str, files: list[str], benchmark_data: Path, tmp_path: Path, reproduce
) -> None:
    out = tmp_path / command
    models = tmp_path / "models"
    result = reproduce(command, "--tiny", "--dataset", benchmark_data, "--out", out, "--model-dir", models)
    assert result.exit_code == 0, result.output
    for name in files:
        assert (out / name).stat().st_size > 0, name
    assert (out / files[0]).read_bytes()[:8] == PNG_MAGIC
    summary = (out / "summary.md").read_text()
    verdict = re.search(r"verdict: .*\? (Yes|No|Not decided|Mixed) \((\w+)\)", result.stdout)
    assert verdict is not None, result.stdout
    words, key = verdict.groups()
    assert VERDICT_WORDS[key] == words
    assert f"{words} ({key})" in summary
    assert "## Runtime" in summary
    # A second run reuses the cached models instead of training them again.
    again = reproduce(command, "--tiny", "--dataset", benchmark_data, "--out", out, "--model-dir", models)
    assert again.exit_code == 0 and "training the" not in again.stderr


@pytest.fixture(scope="module")
def saved_model(benchmark_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A tiny RBM of the benchmark data's width, saved, with its exact log Z."""
    train = torch.from_numpy(np.load(benchmark_data)["x_train"]).float()
    benchmark = train_benchmark_model("cd1", TrainingConfig.tiny(), train, seed=2, dataset="bench")
    path = benchmark.model.save(tmp_path_factory.mktemp("supplied") / "rbm.safetensors")
    return path, exact_log_z(benchmark.model)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "table"), [("rts-vs-ais", "rts-vs-ais.md"), ("estimators-vs-k", "estimators-vs-k.md")]
)
def test_model_file_is_scored_against_the_reference(
    command: str, table: str, saved_model: tuple[Path, float], benchmark_data: Path, tmp_path: Path, reproduce
) -> None:
    path, log_z = saved_model  # the exact value, passed as a reference with an s.e. of 0.05
    out = tmp_path / command
    result = reproduce(
        command, "--preset", "tiny", "--dataset", benchmark_data, "--out", out, "--model-file", path,
        "--reference-log-z", log_z, "--reference-stderr", 0.05, "--reference-source", "enumeration",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "training the" not in result.stderr and not (out / "models").exists()
    summary = (out / "summary.md").read_text()
    assert f"reference log Z = {log_z:.3f} ± 0.050 (enumeration)" in summary
    assert "cannot be told from the reference's error" in summary
    assert "against the exact" not in summary and "exact log Z =" not in summary
    assert "linear ladder" in summary
    assert "within 2 s.e. (own ⊕ reference)" in (out / table).read_text()
    header, first = (out / f"{command}-statistics.csv").read_text().splitlines()[:2]
    assert header.endswith("log_z_reference,reference_stderr") and first.endswith(",0.05")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model-file", "MODEL"], "--model-file needs --reference-log-z and --reference-stderr"),
        (["--model-file", "MODEL", "--reference-log-z", "3"], "needs --reference-stderr"),
        (["--reference-log-z", "3", "--reference-stderr", "0.1"], "only go(es) with --model-file"),
        (
            [
                "--model-file",
                "MODEL",
                "--reference-log-z",
                "3",
                "--reference-stderr",
                "0.1",
                "--model",
                "pcd",
            ],
            "not with --model-file",
        ),
        (
            ["--model-file", "MODEL", "--reference-log-z", "3", "--reference-stderr", "-1"],
            "--reference-stderr",
        ),
        (["--preset", "paper", "--tiny"], "give --preset or --full/--tiny, not both"),
    ],
)
@pytest.mark.parametrize("command", ["rts-vs-ais", "estimators-vs-k"])
def test_reference_options_are_checked(
    command: str,
    arguments: list[str],
    message: str,
    saved_model: tuple[Path, float],
    tmp_path: Path,
    reproduce,
) -> None:
    arguments = [str(saved_model[0]) if argument == "MODEL" else argument for argument in arguments]
    result = reproduce(command, *arguments, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_model_file_must_be_as_wide_as_the_data(
    saved_model: tuple[Path, float], tmp_path: Path, reproduce
) -> None:
    narrow = tmp_path / "narrow.npz"
    np.savez(narrow, x_train=np.zeros((10, 9), dtype=np.uint8), x_test=np.zeros((4, 9), dtype=np.uint8))
    result = reproduce(
        "rts-vs-ais", "--tiny", "--dataset", narrow, "--out", tmp_path / "out", "--model-file", saved_model[0],
        "--reference-log-z", "3", "--reference-stderr", "0.1",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "has 16 visible units but the data have 9 columns" in result.output

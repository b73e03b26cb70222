"""The DBM on the command line: ``train --model dbm``, its report rows and ``sample``.

Properties checked:
* ``train --model dbm --layers ...`` writes the run directory and a DBM model file with the
  asked sizes; ``--track-bound-every`` puts the variational bound (exact log Z on an
  enumerable DBM) into ``metrics.csv``, equal to the bound recomputed from the saved model;
* ``--algorithm sap`` is PCD: the same seed gives a bit-identical model; ``--pretrain``
  changes the start;
* flags that do not fit the model are refused in one line naming the flag;
* the DBM rows for ``evaluate`` (:mod:`boltzlab.cli.dbm_report`): the bound per split with its
  log Z ± error, and per-example AIS log p(v) within its error bar of the exact value;
* ``sample`` draws a saved DBM's chains as PNGs (plain and adaptive ST).

``reproduce cast`` is tested with the reproductions (experiments/tests/cast_comparison).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli import progress_display
from boltzlab.cli.dbm_report import dbm_bound_rows, dbm_likelihood_rows, format_dbm_rows
from boltzlab.cli.main import cli
from boltzlab.estimators.dbm_likelihood import exact_log_likelihood

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
COMMON = ["--data", "digits", "--updates", "30", "--log-every", "10", "--chains", "13", "--batch-size", "20"]


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _train(out: Path, *extra: str) -> Result:
    result = invoke("train", "--model", "dbm", "--layers", "64,9,5", *COMMON, "--out", out, *extra)
    assert result.exit_code == 0, result.output
    return result


def test_train_dbm_writes_a_run_with_the_tracked_bound(tmp_path: Path):
    out = tmp_path / "run"
    result = _train(out, "--algorithm", "sap", "--track-bound-every", "10", "--learning-rate", "0.05")
    for name in (
        "config.toml",
        "metrics.csv",
        "model.safetensors",
        "plots/training.png",
        "plots/samples.png",
    ):
        assert (out / name).is_file(), name
    assert "training DBM 64-9-5" in result.output and "train lower bound" in result.output
    model = bl.DBM.load(out / "model.safetensors")
    assert model.layer_sizes == (64, 9, 5)
    with open(out / "metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(row["update"]) for row in rows] == [0, 10, 20, 30]
    data = bl.data.load("digits")
    expected = bl.variational_lower_bound(model, data.train, bl.exact_log_z(model))
    assert float(rows[-1]["train_bound"]) == pytest.approx(expected, abs=1e-4)
    assert float(rows[-1]["train_bound"]) > float(rows[0]["train_bound"])


def test_sap_is_pcd_and_pretraining_changes_the_start(tmp_path: Path):
    _train(tmp_path / "sap", "--algorithm", "sap")
    _train(tmp_path / "pcd", "--algorithm", "pcd")
    _train(tmp_path / "pre", "--algorithm", "pcd", "--pretrain", "--pretrain-updates", "20")
    sap, pcd, pre = (bl.DBM.load(tmp_path / name / "model.safetensors") for name in ("sap", "pcd", "pre"))
    for a, b in zip(sap.parameters(), pcd.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(pre.weights[0], pcd.weights[0])
    assert "pretrain = true" in (tmp_path / "pre" / "config.toml").read_text()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--model", "dbm", "--hidden", "5", "--layers", "64,9,5"], "--hidden"),
        (["--model", "dbm"], "--layers"),
        (["--model", "dbm", "--layers", "63,9,5"], "63"),
        (["--model", "dbm", "--layers", "64,9"], "--layers"),
        (["--hidden", "5", "--layers", "64,9,5"], "--layers"),
        (["--hidden", "5", "--pretrain"], "--pretrain"),
        (["--model", "dbm", "--layers", "64,9,5", "--algorithm", "nope"], "--algorithm"),
    ],
)
def test_flags_that_do_not_fit_the_model_are_refused(tmp_path: Path, args, fragment):
    # pcd: COMMON's --chains means nothing to the default cd, which refuses it first.
    result = invoke("train", *COMMON, "--algorithm", "pcd", "--out", tmp_path / "x", *args)
    assert_one_line_error(result, fragment)


@pytest.fixture(scope="module")
def trained_dbm(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dbm") / "run"
    _train(out, "--algorithm", "cast", "--levels", "4", "--lag", "5", "--learning-rate", "0.05")
    return out / "model.safetensors"


@pytest.mark.slow
def test_dbm_report_rows_give_the_bound_and_log_z_with_its_error(trained_dbm: Path):
    model = bl.DBM.load(trained_dbm)
    data = bl.data.load("digits")
    estimate = bl.estimate_log_z(model, method="ais", n_chains=200, n_temperatures=200, generator=0)
    rows = dbm_bound_rows(model, data, estimate)
    assert [row.split for row in rows] == ["train", "test"]
    for row, examples in zip(rows, (data.train, data.test), strict=True):
        assert row.value == pytest.approx(
            bl.variational_lower_bound(model, examples, estimate.log_z), abs=1e-9
        )
        assert (row.log_z, row.log_z_stderr, row.log_z_method) == (estimate.log_z, estimate.stderr, "ais")
        assert row.stderr > 0 and row.n_examples == examples.shape[0]
    # The AIS log Z is within its error bar of the exact one (so the rows are worth printing).
    exact = bl.exact_log_z(model)
    assert abs(estimate.log_z - exact) < 4 * estimate.stderr
    text = format_dbm_rows(rows)
    assert "lower bound" in text and f"{estimate.stderr:.4f}" in text and f"{estimate.log_z:.4f}" in text


def test_dbm_likelihood_rows_are_within_their_error_bars_of_exact(trained_dbm: Path):
    model = bl.DBM.load(trained_dbm)
    test = bl.data.load("digits").test
    log_z = bl.exact_log_z(model)
    rows = dbm_likelihood_rows(
        model, test, log_z, n_examples=6, n_chains=400, n_temperatures=100, generator=3
    )
    ais, bound = rows
    assert (ais.quantity, bound.quantity) == ("AIS log p(v)", "lower bound")
    exact = float(exact_log_likelihood(model, test[:6], log_z=log_z).mean())
    assert abs(ais.value - exact) < 4 * ais.stderr
    assert bound.value <= exact + 1e-9
    assert bound.value == pytest.approx(
        float(bl.variational_lower_bound(model, test[:6], log_z, n_updates=10))
    )


def test_evaluate_prints_the_bound_and_per_example_likelihood_of_a_dbm(
    trained_dbm: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(progress_display, "on_terminal", lambda: True)  # a person is watching
    result = invoke(
        "evaluate", trained_dbm, "--data", "digits", "--budget", "200", "--likelihood-examples", "4"
    )
    assert result.exit_code == 0, result.output
    # Every long estimate shows its progress on stderr, the per-example AIS of the DBM too.
    for label in ("[1/3] exact", "[2/3] ais", "[3/3] rts", "DBM log p(v), per-example AIS: "):
        assert label in result.stderr, label
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "RAISE" not in result.output
    # A 64-9-5 DBM is enumerable, so exact is a default method and RAISE (RBM-only) is not.
    # Table rows only: a verdict's explanation ("rts is UNRELIABLE:") also starts with a name.
    methods = [
        line.split()[0]
        for line in lines
        if len(line.split()) > 1 and line.split()[0] in bl.estimators.methods() and line.split()[1] != "is"
    ]
    assert methods == ["exact", "ais", "rts"]
    model = bl.DBM.load(trained_dbm)
    data = bl.data.load("digits")
    exact = bl.exact_log_z(model)
    bound_lines = [line for line in lines if line.startswith("lower bound") and "first" not in line]
    assert [line.split()[2] for line in bound_lines] == ["train", "test"]
    # The bound rows use the exact log Z, so they equal the bound computed here.
    for line, examples in zip(bound_lines, (data.train, data.test), strict=True):
        value = float(line.split()[4])
        assert value == pytest.approx(bl.variational_lower_bound(model, examples, exact), abs=1e-4)
        assert line.rstrip().endswith("exact")
    ais_line = next(line for line in lines if line.startswith("AIS log p(v)"))
    assert "test (first 4)" in ais_line


@pytest.mark.parametrize("sampler", ["plain", "ast"])
def test_sample_draws_a_dbm_as_png(trained_dbm: Path, tmp_path: Path, sampler: str):
    out = tmp_path / f"{sampler}.png"
    result = invoke(
        "sample", trained_dbm, "--sampler", sampler, "--sweeps", "40", "--keep-every", "10", "--out", out
    )
    assert result.exit_code == 0, result.output
    assert "DBM 64×9×5" in result.output
    assert out.read_bytes().startswith(PNG_MAGIC)
    if sampler == "ast":
        assert (tmp_path / "ast-temperatures.png").read_bytes().startswith(PNG_MAGIC)

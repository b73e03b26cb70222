"""``boltzlab logz`` for every method and ``boltzlab evaluate``.

Properties checked: ``logz --method m`` lands within 4 of its own standard errors of the
exact log Z on a tiny model for every sampling method (exact prints the library's value);
RAISE without ``--data`` and a flag that means nothing to the chosen method each fail in one
``error:`` line; ``evaluate`` prints one table row per method, log-likelihoods consistent with
its log Z, and the AIS/RAISE sandwich. The accuracy ``reproduce`` commands are tested with the
reproductions (experiments/tests/accuracy).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
import harness
from boltzlab import distributed
from boltzlab.cli import evaluate as evaluate_command
from boltzlab.cli.cost_cap import DEFAULT_METHOD_WORK, NO_CAP, CostCap, default_cap
from boltzlab.cli.main import cli
from boltzlab.estimators.exact import exact_log_z

N_VISIBLE, N_HIDDEN = 7, 3
LOG_Z_LINE = re.compile(r"log Z = (-?[0-9.]+) ± ([0-9.]+)")

# Small budgets per method: seconds on one thread, error bars of a few hundredths of a nat.
METHOD_FLAGS = {
    "ais": ["--chains", "200", "--temperatures", "300"],
    "raise": ["--chains", "20", "--temperatures", "300", "--examples", "30"],
    "rts": ["--chains", "40", "--temperatures", "8", "--sweeps", "400"],
    "ts": ["--chains", "40", "--temperatures", "8", "--sweeps", "400"],
    "ti": ["--chains", "40", "--temperatures", "8", "--sweeps", "400"],
    "ti-rb": ["--chains", "40", "--temperatures", "8", "--sweeps", "400"],
    "mbar": ["--chains", "40", "--temperatures", "8", "--sweeps", "400"],
}


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A binary .npz dataset of 7 variables: 60 train and 30 test examples."""
    generator = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    marginals = np.linspace(0.15, 0.85, N_VISIBLE)
    np.savez(
        path,
        x_train=(generator.random((60, N_VISIBLE)) < marginals).astype(np.uint8),
        x_test=(generator.random((30, N_VISIBLE)) < marginals).astype(np.uint8),
    )
    return path


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """A 7×3 RBM whose base was never fitted (uniform base), saved; and its exact log Z."""
    model = harness.random_rbm(N_VISIBLE, N_HIDDEN, scale=1.5, seed=3)
    path = model.save(tmp_path_factory.mktemp("model") / "model.safetensors")
    return path, exact_log_z(model)


@pytest.fixture(scope="module")
def fitted_model_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The same RBM with a fitted base-rate base (no ``--data`` needed), saved; and its exact log Z."""
    model = harness.random_rbm(N_VISIBLE, N_HIDDEN, scale=1.5, seed=3, base_rate=True)
    path = model.save(tmp_path_factory.mktemp("fitted") / "model.safetensors")
    return path, exact_log_z(model)


def test_logz_exact_prints_the_enumerated_value(fitted_model_file: tuple[Path, float]) -> None:
    path, exact = fitted_model_file
    result = invoke("logz", path, "--method", "exact")
    assert result.exit_code == 0, result.output
    printed = float(re.search(r"log Z = (-?[0-9.]+) \(exact\)", result.stdout).group(1))
    assert abs(printed - exact) < 1e-5


# `logz` reads every method through its record, so AIS, RAISE and RTS (one of each family) are
# the fast tier's; the other tempered methods take the same path and 4-6 s each (pilot, witness)
# and run in the slow tier. Each method's exact-oracle test is in tests/estimators (fast tier).
SLOW_IN_THE_CLI = {"ts", "ti", "ti-rb", "mbar"}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(name, marks=pytest.mark.slow) if name in SLOW_IN_THE_CLI else name
        for name in METHOD_FLAGS
    ],
)
def test_logz_every_method_within_four_standard_errors(
    method: str, fitted_model_file: tuple[Path, float], data_file: Path
) -> None:
    path, exact = fitted_model_file
    data = ["--data", data_file] if method == "raise" else []
    result = invoke("logz", path, "--method", method, *METHOD_FLAGS[method], *data, "--seed", "2")
    assert result.exit_code == 0, result.output
    match = LOG_Z_LINE.search(result.stdout)
    assert match is not None, result.stdout
    log_z, stderr = float(match.group(1)), float(match.group(2))
    assert 0 < stderr < 0.5, result.stdout
    assert abs(log_z - exact) / stderr < 4.0, (method, log_z, exact, stderr)
    assert re.search(r"cost: [0-9,]+ chain-sweeps", result.stdout)
    bound = {"ais": "lower bound", "raise": "upper bound"}.get(method, "either sign")
    assert bound in result.stdout


def test_logz_varopt_schedule_with_deceleration(fitted_model_file: tuple[Path, float]) -> None:
    path, exact = fitted_model_file
    result = invoke(
        "logz", path, "--method", "ais", "--schedule", "varopt", "--decelerate", "0.01",
        "--temperatures", "300", "--chains", "200",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    log_z, stderr = (float(group) for group in LOG_Z_LINE.search(result.stdout).groups())
    assert abs(log_z - exact) / stderr < 4.0


def test_logz_raise_without_data_is_one_line(fitted_model_file: tuple[Path, float]) -> None:
    assert_one_line_error(invoke("logz", fitted_model_file[0], "--method", "raise"), "--data")


def test_logz_refuses_a_flag_the_method_does_not_take(fitted_model_file: tuple[Path, float]) -> None:
    assert_one_line_error(
        invoke("logz", fitted_model_file[0], "--method", "ais", "--sweeps", "100"), "--sweeps", "rts"
    )
    assert_one_line_error(
        invoke("logz", fitted_model_file[0], "--method", "exact", "--chains", "10"), "--chains"
    )


def test_logz_budget_flags_reach_the_chain_budget(fitted_model_file: tuple[Path, float]) -> None:
    """--target-stderr and --max-chains are the library's target_stderr and max_chains."""
    path = fitted_model_file[0]
    result = invoke(
        "logz",
        path,
        "--method",
        "ais",
        "--temperatures",
        "100",
        "--max-chains",
        "150",
        "--target-stderr",
        "0.5",
        "--json",
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["diagnostics"]["budget"]["max_chains"] == 150
    assert record["diagnostics"]["budget"]["target_stderr"] == 0.5
    assert_one_line_error(
        invoke("logz", path, "--method", "raise", "--target-stderr", "0.1"), "--target-stderr", "ais"
    )


def test_logz_under_torchrun_refuses_a_method_that_does_not_split(
    fitted_model_file: tuple[Path, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's ``shards`` decides: anchored AIS would run whole on every process."""
    monkeypatch.setattr(distributed, "topology", lambda: distributed.Topology(world_size=2, active=True))
    assert_one_line_error(
        invoke("logz", fitted_model_file[0], "--method", "anchored-ais"), "does not split", "torchrun"
    )


def test_logz_data_fits_a_missing_base(model_file: tuple[Path, float], data_file: Path) -> None:
    result = invoke("logz", model_file[0], "--method", "ais", "--chains", "50", "--temperatures", "50")
    assert result.exit_code == 0 and "uniform base" in result.stderr
    result = invoke(
        "logz",
        model_file[0],
        "--method",
        "ais",
        "--chains",
        "50",
        "--temperatures",
        "50",
        "--data",
        data_file,
    )
    assert result.exit_code == 0 and "base-rate base fitted" in result.stderr


def test_evaluate_prints_the_table_and_the_sandwich(
    fitted_model_file: tuple[Path, float], data_file: Path
) -> None:
    path, exact = fitted_model_file
    result = invoke(
        "evaluate", path, "--data", data_file, "--methods", "exact,ais,raise,rts", "--budget", "200",
        "--chains", "30", "--examples", "20",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.strip().startswith("method"))
    for column in ("log Z", "± s.e.", "bias", "chain-sweeps", "train LL", "test LL", "time"):
        assert column in header
    rows = {
        line.split()[0]: line.split() for line in lines if line.split() and line.split()[0] in METHOD_FLAGS
    }
    rows["exact"] = next(line.split() for line in lines if line.strip().startswith("exact"))
    assert set(rows) == {"exact", "ais", "raise", "rts"}
    assert abs(float(rows["exact"][1]) - exact) < 1e-3
    # The log-likelihood columns are mean log f − log Z: their differences mirror log Z's.
    train_gap = float(rows["ais"][-4]) - float(rows["exact"][-4])
    assert abs(train_gap + (float(rows["ais"][1]) - float(rows["exact"][1]))) < 2e-4
    sandwich = next(line for line in lines if line.startswith("sandwich:"))
    assert "AIS, lower bound" in sandwich and "RAISE, upper bound" in sandwich and "exact log Z" in sandwich


@pytest.mark.slow
def test_evaluate_without_ais_and_raise_has_no_sandwich(
    fitted_model_file: tuple[Path, float], data_file: Path
) -> None:
    result = invoke("evaluate", fitted_model_file[0], "--data", data_file, "--methods", "exact,ti")
    assert result.exit_code == 0, result.output
    assert "sandwich" not in result.stdout


def test_evaluate_unknown_method_is_one_line(fitted_model_file: tuple[Path, float], data_file: Path) -> None:
    assert_one_line_error(
        invoke("evaluate", fitted_model_file[0], "--data", data_file, "--methods", "ais,nope"), "nope"
    )


def test_evaluate_says_what_the_cost_cap_cut_and_no_progress_away_from_a_terminal(
    fitted_model_file: tuple[Path, float], data_file: Path
) -> None:
    result = invoke(
        "evaluate", fitted_model_file[0], "--data", data_file, "--methods", "ais,raise", "--budget", "200",
        "--max-cost", "3000",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "cost cap: at most 3,000 chain-sweeps for each of ais, raise (--max-cost)" in result.stdout
    # --budget fixes AIS's chains (a budget given is kept); RAISE's examples are cut.
    assert "capped by --max-cost: ais" not in result.stdout
    assert "capped by --max-cost: raise: 10 of the 30 held-out examples" in result.stdout
    # Not a terminal here (CliRunner's streams): no progress at all, stderr holds the base line
    # alone (tests/cli/test_rough_edges.py shows the bars on a terminal).
    assert "[1/2]" not in result.stderr and "chain-sweeps" not in result.stderr


def test_the_cost_cap_binds_on_large_models_only() -> None:
    large, small = bl.RBM(n_visible=784, n_hidden=500), bl.RBM(n_visible=784, n_hidden=20)
    assert default_cap(large) == int(DEFAULT_METHOD_WORK // (784 * 500))
    held_out = torch.zeros(100, 784)
    for model, capped in ((large, True), (small, False)):
        cap = CostCap(default_cap(model))
        ais_options, ais_cut = cap.apply("ais", {}, examples_given=False)
        raise_options, raise_cut = cap.apply("raise", {"data": held_out}, examples_given=False)
        assert bool(ais_cut) == capped and bool(raise_cut) == capped
        if capped:
            assert 100 <= ais_options["max_chains"] < 1600
            assert 10 <= raise_options["data"].shape[0] < 100
    # The tempered budget keeps its first 100 chains and at most cap / 100 long-run sweeps.
    options, cut = CostCap(500_000).apply("rts", {}, examples_given=False)
    assert options == {"max_chains": 100, "max_sweeps": 5000} and "100 chains × 5,000" in cut
    # A floor above the cap is run and said.
    assert "above the cap" in CostCap(1000).apply("ais", {}, examples_given=False)[1]
    # A budget or examples the user chose are kept.
    cap = CostCap(default_cap(large))
    assert cap.apply("ais", {"n_chains": 50}, examples_given=False) == ({"n_chains": 50}, "")
    assert cap.apply("rts", {"n_sweeps": 50}, examples_given=False) == ({"n_sweeps": 50}, "")
    assert cap.apply("raise", {"data": held_out}, examples_given=True)[1] == ""
    assert NO_CAP.apply("ais", {}, examples_given=False) == ({}, "")


def test_evaluate_anchors_only_where_the_smaller_layer_is_small() -> None:
    # With hundreds of units in the smaller layer the anchor set holds a negligible share of Z:
    # anchored AIS would be a second run of AIS, not another method.
    small, large = bl.RBM(n_visible=784, n_hidden=20), bl.RBM(n_visible=784, n_hidden=500)
    assert "anchored-ais" in evaluate_command._default_methods(small)
    assert "anchored-ais" not in evaluate_command._default_methods(large)
    assert {"ais", "raise", "rts"} <= set(evaluate_command._default_methods(large))

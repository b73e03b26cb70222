"""No confident miss on a sharp model the project trained: every path flags it or says unchecked.

The fixture (``tests/fixtures/sharp_fashion_784x20.safetensors``, made by
``benchmarks/sharp_model.py``) is a 784×20 RBM trained by ``bl.train`` with PCD-1 at a constant
learning rate on binarised Fashion-MNIST; it keeps its 1,000 witness rows. Its mass sits in a
mode that annealing from the base never reaches, and neither do witness chains started from the
base: AIS lands about 30 nats low with an error bar under one nat, and a bound from base
samples misses the mode too, so before the third verdict the library could only add a note
(docs/trust.md, "Three verdicts"). Chains from the kept rows find the mode at once. The exact
log Z comes from enumerating the 2^20 hidden states.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.sklearn import BernoulliRBM

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sharp_fashion_784x20.safetensors"
# AIS at a fixed, small budget (the default's chain budget grows to 1,600 chains, minutes here):
# the miss is the path's, not the budget's.
BUDGET = {"n_chains": 100, "n_temperatures": 1000}
CLI_BUDGET = ("--chains", "100", "--temperatures", "1000")
MIN_MISS = 5.0  # nats: what makes this the regression case


@pytest.fixture(scope="module")
def sharp() -> tuple[bl.RBM, float]:
    model = bl.RBM.load(FIXTURE)
    torch.set_num_threads(2)
    try:
        exact = bl.exact_log_z(model)
    finally:
        torch.set_num_threads(1)
    assert exact == pytest.approx(model.metadata["exact_log_z"], abs=1e-6)
    return model, exact


def _without_witness(tmp_path: Path) -> Path:
    """The fixture saved with no witness rows: what a model file of an earlier boltzlab holds."""
    path = tmp_path / "bare.safetensors"
    bl.RBM.load(FIXTURE).clear_witness().save(path)
    return path


def _logz(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["logz", *(str(arg) for arg in args), *CLI_BUDGET, "--seed", "3"])
    return result.exit_code, result.output


@pytest.mark.slow
def test_the_library_never_calls_the_miss_reliable(sharp):
    model, exact = sharp
    bare = bl.RBM.load(FIXTURE).clear_witness()
    # No data and no kept rows: the witness starts from the base and misses the mode too.
    blind = bl.estimate_log_z(bare, "ais", generator=3, **BUDGET)
    assert blind.log_z < exact - MIN_MISS, "the fixture must be a case annealing misses by nats"
    assert blind.lower_bound.started_from == "base" and blind.lower_bound.log_z < exact - MIN_MISS
    assert not blind.reliable and blind.status in ("unchecked", "unreliable")
    # The kept rows start the witness from data: the miss is flagged, with the reason.
    kept = bl.estimate_log_z(model, "ais", generator=3, **BUDGET)
    assert kept.log_z == blind.log_z  # the same draw; only the witness differs
    assert kept.lower_bound.started_from == "witness rows"
    assert kept.status == "unreliable" and kept.lower_bound.log_z > exact - 0.01
    assert any("below a certified lower bound" in warning for warning in kept.warnings)
    given = bl.estimate_log_z(bare, "ais", generator=3, check_data=model.witness, **BUDGET)
    assert given.status == "unreliable" and given.lower_bound.started_from == "data"


@pytest.mark.slow
def test_logz_flags_it_with_and_without_data_and_in_json(sharp, tmp_path):
    model, exact = sharp
    code, output = _logz(FIXTURE)  # no --data: the model's kept rows
    assert code == 0 and "verdict: UNRELIABLE" in output and "started at the witness rows" in output
    bare = _without_witness(tmp_path)
    code, output = _logz(bare)
    assert code == 0 and "verdict: reliable" not in output
    assert "verdict: unchecked" in output or "verdict: UNRELIABLE" in output
    rows = tmp_path / "rows.npy"
    np.save(rows, model.witness.to(torch.uint8).numpy())
    code, output = _logz(bare, "--data", rows)
    assert code == 0 and "verdict: UNRELIABLE" in output, output
    for path in (FIXTURE, bare):
        code, output = _logz(path, "--json")
        record = json.loads(output)
        assert code == 0 and record["reliable"] is False and record["verdict"] in ("unchecked", "unreliable")
        assert record["log_z"] < exact - MIN_MISS


@pytest.mark.slow
def test_the_scikit_learn_estimator_says_it_is_not_reliable(sharp):
    model, exact = sharp
    rows = model.witness.numpy()
    rbm = BernoulliRBM(
        n_components=20, n_iter=1, random_state=0, log_z_method="ais", log_z_params=dict(BUDGET)
    )
    rbm.fit(rows)
    with torch.no_grad():  # the fixture's parameters in the fitted estimator's model
        for name in ("weights", "visible_bias", "hidden_bias", "base_logits"):
            getattr(rbm.model_, name).copy_(getattr(model, name))
    assert rbm.log_z_ < exact - MIN_MISS
    assert rbm.log_z_reliable_ is False and rbm.log_z_verdict_ == "unreliable"

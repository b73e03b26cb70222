"""The witness rows a model keeps, and the third verdict, ``"unchecked"`` (docs/trust.md).

An estimate whose missing-mass witness could not start from data is ``"unchecked"`` with
``reliable=False``, never ``"reliable"``; a model fitted to data keeps rows of it, saved with
its parameters, so that later estimates without ``check_data`` start the witness from data.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

import boltzlab as bl
from boltzlab.errors import ModelFileError, ValidationError
from boltzlab.estimators.result import LogZEstimate
from boltzlab.estimators.verdict.checks import Verdict
from boltzlab.estimators.verdict.judge import UNCHECKED_NO_DATA, judge
from boltzlab.estimators.verdict.lower_bound import unique_rows
from boltzlab.models.witness import DEFAULT_WITNESS_ROWS, MAX_WITNESS_ROWS, pack_bits, unpack_bits
from harness import exact_visible_samples, random_dbm, sharp_rbm, with_exact_witness

# Hand-made models have no fitted base; the warning about it is not what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore:AIS is starting from a uniform base")


def _estimate(**fields) -> LogZEstimate:
    values = {"log_z": 1.0, "stderr": 0.1, "method": "ais", "cost_sweeps": 1, "bound": "lower", **fields}
    return LogZEstimate(**values)


# ---------------------------------------------------------------------------- the three verdicts
def test_three_verdicts_and_reliable_is_true_only_for_a_checked_pass():
    checked = _estimate()
    assert (checked.status, checked.reliable, checked.verdict, checked.reason) == (
        "reliable",
        True,
        "reliable",
        "",
    )
    unchecked = dataclasses.replace(checked, unchecked="no data reached")
    assert (unchecked.status, unchecked.reliable, unchecked.verdict) == ("unchecked", False, "unchecked")
    assert unchecked.reason == "no data reached" and "unchecked: no data reached" in str(unchecked)
    # Nothing makes an unchecked estimate reliable but a check that reached data.
    assert not dataclasses.replace(unchecked, reliable=True).reliable
    failed = _estimate(reliable=False, warnings=("ESS 2 of 100",))
    assert (failed.status, failed.failed, failed.verdict) == ("unreliable", True, "UNRELIABLE: ESS 2 of 100")
    # A failed check wins over an unchecked witness.
    both = dataclasses.replace(failed, unchecked="no data reached")
    assert both.status == "unreliable" and both.reason == "ESS 2 of 100"


def test_verdict_orders_failures_then_the_unchecked_sentence_then_notes():
    verdict = Verdict()
    verdict.note("a note")
    verdict.uncheck("not checked")
    judged = verdict.apply(_estimate())
    assert judged.status == "unchecked" and judged.warnings == ("not checked", "a note")
    verdict.check("a failure")
    judged = verdict.apply(_estimate())
    assert judged.status == "unreliable" and judged.warnings == ("a failure", "not checked", "a note")


def test_judge_without_data_is_unchecked_and_with_data_reliable():
    model = sharp_rbm(10, 6, seed=4, scale=2.0)
    estimate = _estimate(log_z=bl.exact_log_z(model), stderr=0.05)
    options = {"lower_bound_chains": 50, "lower_bound_sweeps": 5, "generator": 0}
    from_base = judge(model, estimate, **options)
    assert from_base.status == "unchecked" and not from_base.reliable
    assert from_base.unchecked == UNCHECKED_NO_DATA and from_base.lower_bound.started_from == "base"
    assert "check_data=<training rows>" in from_base.unchecked and "set_base_rate" in from_base.unchecked
    rows = exact_visible_samples(model, 20, seed=0)
    from_data = judge(model, estimate, check_data=rows, **options)
    assert from_data.status == "reliable" and from_data.lower_bound.started_from == "data and base"
    # Below the bound is a failure whether or not data reached it: unreliable, not unchecked.
    low = dataclasses.replace(estimate, log_z=from_base.lower_bound.log_z - 2.0)
    assert judge(model, low, **options).status == "unreliable"
    off = judge(model, estimate, lower_bound_sweeps=0)
    assert off.status == "unchecked" and "lower_bound_sweeps=0" in off.unchecked


def test_a_model_with_no_certified_bound_is_unchecked():
    dbm = random_dbm((5, 3, 2), seed=1, scale=1.0)
    estimate = bl.estimate_log_z(dbm, "ais", n_chains=32, n_temperatures=100, generator=0)
    assert (
        estimate.status == "unchecked" and "no certified lower bound exists for a DBM" in estimate.unchecked
    )
    assert bl.estimate_log_z(dbm, "exact").status == "reliable"


# ---------------------------------------------------------------------------- estimate_log_z uses the rows
@pytest.mark.slow
def test_estimates_start_the_witness_from_the_rows_the_model_keeps():
    model = sharp_rbm(10, 6, seed=4, scale=2.0)
    options = {"n_chains": 64, "n_temperatures": 300, "generator": 1}
    assert bl.estimate_log_z(model, "ais", **options).status == "unchecked"
    with_exact_witness(model, seed=2)
    kept = bl.estimate_log_z(model, "ais", **options)
    assert kept.status == "reliable", kept.warnings
    assert kept.lower_bound.started_from == "witness rows"
    given = bl.estimate_log_z(model, "ais", check_data=exact_visible_samples(model, 2000, seed=3), **options)
    assert given.lower_bound.started_from == "data"  # check_data= wins over the kept rows
    # The rows only start the witness: the estimate itself is the same draw.
    assert kept.log_z == given.log_z and kept.stderr == given.stderr
    model.clear_witness()
    assert model.witness is None and bl.estimate_log_z(model, "ais", **options).status == "unchecked"


def test_set_base_rate_keeps_a_reproducible_choice_of_rows():
    data = (torch.rand(3000, 13, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    first = bl.RBM(13, 4, generator=0).set_base_rate(data)
    second = bl.RBM(13, 4, generator=1, dtype=torch.float64).set_base_rate(data.double())
    assert first.witness_bits.shape == (DEFAULT_WITNESS_ROWS, 2) and first.witness_bits.dtype == torch.uint8
    assert torch.equal(first.witness_bits, second.witness_bits)
    rows = first.witness
    assert rows.shape == (DEFAULT_WITNESS_ROWS, 13) and rows.dtype == torch.float32
    # Each kept row is a row of the data, each kept once (a choice without replacement).
    codes = {tuple(row.tolist()) for row in data}
    assert all(tuple(row.tolist()) in codes for row in rows)
    assert bl.RBM(13, 4).set_base_rate(data[:40]).witness.shape == (40, 13)  # fewer rows: all kept
    assert bl.RBM(13, 4).set_base_rate(data, witness_rows=0).witness is None
    assert bl.RBM(13, 4).set_base_rate(data, witness_rows=7).witness.shape == (7, 13)


@pytest.mark.parametrize("units", [1, 7, 8, 9, 70])
def test_packing_round_trips_every_unit_count(units):
    rows = (torch.rand(33, units, generator=torch.Generator().manual_seed(units)) < 0.5).to(torch.float64)
    bits = pack_bits(rows)
    assert bits.shape == (33, (units + 7) // 8) and bits.dtype == torch.uint8
    assert torch.equal(unpack_bits(bits, units, dtype=torch.float64, device=torch.device("cpu")), rows)


def test_bad_witness_arguments_are_refused():
    model = bl.RBM(5, 2)
    with pytest.raises(ValidationError, match=r"witness_rows must be an integer in \[0, 100000\]"):
        model.set_witness(torch.zeros(3, 5), n_rows=MAX_WITNESS_ROWS + 1)
    with pytest.raises(ValidationError, match="must be binary"):
        model.set_witness(torch.full((3, 5), 0.5))
    with pytest.raises(ValidationError, match="uint8 of shape"):
        model.set_witness_bits(torch.zeros(3, 2, dtype=torch.uint8))


# ---------------------------------------------------------------------------- model files
def test_the_witness_survives_save_and_load_bit_identically(tmp_path):
    data = (torch.rand(500, 11, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    model = bl.RBM(11, 3, generator=0).set_base_rate(data)
    loaded = bl.RBM.load(model.save(tmp_path / "m.safetensors"))
    assert torch.equal(loaded.witness_bits, model.witness_bits)


def test_a_dbm_keeps_no_rows_and_a_dbm_file_holding_some_is_refused(tmp_path):
    """Nothing would use them (no certified bound): a DBM's file holds no training data."""
    data = (torch.rand(30, 6, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    dbm = random_dbm((6, 4, 3), seed=2, scale=1.0).set_base_rate(data)
    assert getattr(dbm, "witness_bits", None) is None and dbm.base_fitted
    path = dbm.save(tmp_path / "d.safetensors")
    assert "witness" not in load_file(path)

    def add_rows(tensors, header):
        tensors["witness"] = torch.zeros(30, 1, dtype=torch.uint8)
        shapes = json.loads(header["shapes"])
        shapes["witness"] = [30, 1]
        header["shapes"] = json.dumps(shapes)

    _rewrite(path, add_rows)
    with pytest.raises(ModelFileError, match="unexpected tensor 'witness': a dbm keeps no witness rows"):
        bl.DBM.load(path)


def test_a_model_file_without_witness_rows_loads_and_reports_unchecked(tmp_path):
    """What a model file of an earlier boltzlab holds: no "witness" tensor."""
    model = with_exact_witness(sharp_rbm(8, 5, seed=3, scale=1.0))
    path = model.clear_witness().save(tmp_path / "old.safetensors")
    assert "witness" not in load_file(path)
    loaded = bl.RBM.load(path)
    assert loaded.witness is None
    estimate = bl.estimate_log_z(loaded, "ais", n_chains=32, n_temperatures=100, generator=0)
    assert estimate.status == "unchecked" and not estimate.reliable


def _empty_witness(tensors, header):
    """A witness of no rows whose shape entry agrees (the row-count check, not the shape check)."""
    tensors["witness"] = torch.zeros(0, 2, dtype=torch.uint8)
    shapes = json.loads(header["shapes"])
    shapes["witness"] = [0, 2]
    header["shapes"] = json.dumps(shapes)


def _rewrite(path, change):
    """Rewrite a model file's tensors and header with ``change(tensors, header)``."""
    tensors = load_file(path)
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))["__metadata__"]
    change(tensors, header)
    save_file(tensors, path, metadata=header)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t, h: t.update(witness=t["witness"].float()), "witness rows must be uint8 of shape"),
        (lambda t, h: t.update(witness=t["witness"][:, :1].contiguous()), "unlike the tensor"),
        (lambda t, h: t.update(witness=torch.zeros(0, 2, dtype=torch.uint8)), "unlike the tensor"),
        (_empty_witness, "witness rows must number 1 to 100000, got 0"),
    ],
)
def test_a_hostile_witness_tensor_is_refused_clearly(tmp_path, change, message):
    data = (torch.rand(30, 11, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    path = bl.RBM(11, 3, generator=0).set_base_rate(data).save(tmp_path / "m.safetensors")
    _rewrite(path, change)
    with pytest.raises(ModelFileError, match=message):
        bl.RBM.load(path)


def test_a_witness_whose_shape_entry_is_consistent_but_width_wrong_is_refused(tmp_path):
    data = (torch.rand(30, 11, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    path = bl.RBM(11, 3, generator=0).set_base_rate(data).save(tmp_path / "m.safetensors")

    def narrow(tensors, header):
        tensors["witness"] = tensors["witness"][:, :1].contiguous()
        shapes = json.loads(header["shapes"])
        shapes["witness"] = [30, 1]
        header["shapes"] = json.dumps(shapes)

    _rewrite(path, narrow)
    with pytest.raises(ModelFileError, match=r"uint8 of shape \(n, 2\) for 11 visible units"):
        bl.RBM.load(path)


# ---------------------------------------------------------------------------- training
def test_training_keeps_the_witness_and_a_resumed_run_the_same_rows(tmp_path):
    # More rows than are kept, so a resume that chose other rows would show.
    data = (torch.rand(1500, 12, generator=torch.Generator().manual_seed(5)) < 0.3).float()
    options = {"algorithm": "pcd", "batch_size": 20, "generator": 3, "snapshots": None}
    whole = bl.RBM(12, 4, generator=0)
    bl.train(whole, data, n_updates=40, checkpoint_dir=tmp_path / "a", checkpoint_every=20, **options)
    assert whole.witness_bits.shape == (DEFAULT_WITNESS_ROWS, 2)
    first = bl.RBM(12, 4, generator=0)
    bl.train(first, data, n_updates=20, checkpoint_dir=tmp_path / "b", checkpoint_every=20, **options)
    resumed = bl.RBM(12, 4, generator=0)  # a fresh process: nothing but the checkpoint and the data
    bl.train(resumed, data, n_updates=40, checkpoint_dir=tmp_path / "b", resume=True, **options)
    assert torch.equal(resumed.witness_bits, whole.witness_bits)
    assert torch.equal(resumed.weights, whole.weights)
    bare = bl.RBM(12, 4, generator=0)
    bl.train(bare, data, n_updates=2, witness_rows=0, **options)
    assert bare.witness is None and bare.base_fitted


def test_unique_rows_is_torchs_row_unique():
    # The bound's de-duplication: the rows, order and inverse of torch.unique(dim=0), for one
    # and several 62-bit words, with many repeats, negative codes and an empty block.
    generator = torch.Generator().manual_seed(0)
    for width in (1, 2, 3):
        rows = torch.randint(-3, 4, (500, width), generator=generator, dtype=torch.int64)
        rows[::7] = rows[3]  # heavy repeats
        ours, inverse = unique_rows(rows)
        theirs, their_inverse = torch.unique(rows, dim=0, return_inverse=True)
        assert torch.equal(ours, theirs) and torch.equal(inverse, their_inverse), width
        assert torch.equal(ours[inverse], rows)
    empty, inverse = unique_rows(torch.empty(0, 2, dtype=torch.int64))
    assert empty.shape == (0, 2) and inverse.shape == (0,)

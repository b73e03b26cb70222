"""Per-example (sequence) weights in training, in the base, and in the likelihoods.

Integer weights mean "this row, that many times": every weighted quantity is checked against
the same data with rows repeated.

Properties checked:
* the weighted ``log_likelihood`` and ``pseudo_log_likelihood`` equal the plain ones of the
  repeated rows (to round-off), for a binary and a Potts RBM; only the proportions matter;
* the base fitted with weights (binary RBM, DBM, Potts RBM) equals the base of the repeated rows;
* training draws minibatch rows with probability ``w_n / Σ w``: 3,600 draws of a weighted run,
  counted per row, pass exact binomial tests (Bonferroni over rows at ``FALSE_ALARM``), and a
  zero weight is never drawn; so the expected minibatch gradient is the weighted mean of the
  per-row gradients, which is the gradient of the repeated rows (checked exactly for the PL);
* a weighted run is reproducible from its seed, its exact tracker reports the weighted mean
  log-likelihood, and a resume with other weights is refused;
* bad weights (shape, NaN, negative, zero sum) are refused with messages naming the problem,
  and a model whose base cannot take weights is refused before training.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from scipy import stats

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.estimators.pseudo_likelihood import pseudo_likelihood_gradient
from boltzlab.models.gaussian_rbm import GaussianRBM
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.training import Callback
from tolerances import FALSE_ALARM

ROUND_OFF = 1e-12
COUNTS = torch.tensor([2, 0, 1, 3, 1, 4, 1, 2, 0])


def _rows() -> torch.Tensor:
    """Nine distinct 7-bit rows (so a drawn row identifies its index)."""
    codes = torch.tensor([3, 17, 33, 64, 90, 101, 77, 126, 5])
    return ((codes[:, None] >> torch.arange(7)) & 1).double()


def _sequences() -> torch.Tensor:
    return torch.randint(0, 3, (9, 5), generator=torch.Generator().manual_seed(1))


def _rbm() -> bl.RBM:
    return bl.RBM(n_visible=7, n_hidden=3, generator=0, weight_std=1.0, dtype=torch.float64)


def _potts() -> PottsRBM:
    return PottsRBM(n_sites=5, n_states=3, n_hidden=2, generator=0, weight_std=1.0, dtype=torch.float64)


@pytest.mark.parametrize("kind", ["rbm", "potts"])
def test_weighted_likelihoods_equal_repeated_rows(kind: str) -> None:
    model, data = (_rbm(), _rows()) if kind == "rbm" else (_potts(), _sequences())
    repeated = data.repeat_interleave(COUNTS, 0)
    log_z = bl.exact_log_z(model)
    weighted = bl.log_likelihood(model, data, log_z, sample_weights=COUNTS)
    assert weighted == pytest.approx(bl.log_likelihood(model, repeated, log_z), abs=ROUND_OFF)
    scaled = bl.log_likelihood(model, data, log_z, sample_weights=COUNTS.double() / 7)
    assert scaled == pytest.approx(weighted, abs=ROUND_OFF)
    assert bl.pseudo_log_likelihood(model, data, sample_weights=COUNTS) == pytest.approx(
        bl.pseudo_log_likelihood(model, repeated), abs=ROUND_OFF
    )


@pytest.mark.parametrize("kind", ["rbm", "dbm", "potts"])
def test_weighted_base_equals_repeated_rows(kind: str) -> None:
    def build():
        if kind == "rbm":
            return _rbm(), _rows()
        if kind == "dbm":
            return bl.DBM(layer_sizes=[7, 3, 2], generator=0, dtype=torch.float64), _rows()
        return _potts(), _sequences()

    weighted, data = build()
    weighted.set_base_rate(data, sample_weights=COUNTS)
    repeated, _ = build()
    repeated.set_base_rate(data.repeat_interleave(COUNTS, 0))
    torch.testing.assert_close(weighted.base_logits, repeated.base_logits, rtol=0, atol=ROUND_OFF)


class _CountRows(Callback):
    """Counts, after every update, which rows of ``data`` the minibatch buffer holds."""

    def __init__(self, data: torch.Tensor) -> None:
        self.codes = (data @ (2.0 ** torch.arange(data.shape[1], dtype=data.dtype))).long().tolist()
        self.counts = torch.zeros(len(self.codes), dtype=torch.int64)

    def on_update(self, run) -> None:
        drawn = (run.batch @ (2.0 ** torch.arange(run.batch.shape[1], dtype=run.batch.dtype))).long()
        for code in drawn.tolist():
            self.counts[self.codes.index(code)] += 1


def test_rows_are_drawn_in_proportion_to_their_weights() -> None:
    data = _rows()
    counter = _CountRows(data)
    n_updates, batch_size = 400, 9
    bl.train(
        _rbm(),
        data,
        algorithm="pl",
        sample_weights=COUNTS,
        batch_size=batch_size,  # all 9 rows' worth per update, drawn with replacement
        n_updates=n_updates,
        learning_rate=1e-3,
        generator=0,
        snapshots=0,
        callbacks=[counter],
    )
    draws = n_updates * batch_size
    assert int(counter.counts.sum()) == draws
    probabilities = COUNTS.double() / COUNTS.sum()
    for count, p in zip(counter.counts.tolist(), probabilities.tolist(), strict=True):
        if p == 0:
            assert count == 0
            continue
        law = stats.binom(draws, p)
        p_value = 2 * min(law.cdf(count), law.sf(count - 1))
        assert p_value > FALSE_ALARM / len(COUNTS), (count, draws * p)


def test_expected_minibatch_gradient_is_the_repeated_rows_gradient() -> None:
    """The PL gradient of a minibatch is the mean of its rows' gradients; rows drawn with
    probability w_n/Σw make its expectation Σ_n (w_n/Σw)·g_n, which is the gradient of the
    data with every row repeated w_n times."""
    model, data = _rbm(), _rows()
    probabilities = COUNTS.double() / COUNTS.sum()
    per_row = [pseudo_likelihood_gradient(model, data[n : n + 1]) for n in range(len(data))]
    repeated = pseudo_likelihood_gradient(model, data.repeat_interleave(COUNTS, 0))
    for name in ("weights", "visible_bias", "hidden_bias"):
        expected = sum(p * getattr(g, name) for p, g in zip(probabilities, per_row, strict=True))
        torch.testing.assert_close(expected, getattr(repeated, name), rtol=0, atol=ROUND_OFF)


def _weighted_run(directory: Path | None = None, *, weights=None, n_updates: int = 12, **extra):
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    result = bl.train(
        model,
        _rows().float(),
        algorithm="pcd",
        n_chains=13,
        sample_weights=COUNTS if weights is None else weights,
        batch_size=4,
        n_updates=n_updates,
        learning_rate=0.1,
        generator=3,
        snapshots=0,
        track_exact_every=6,
        log_every=6,
        checkpoint_dir=directory,
        **extra,
    )
    return model, result


def test_weighted_runs_are_reproducible_and_tracked_weighted(tmp_path: Path) -> None:
    first, result = _weighted_run()
    second, _ = _weighted_run()
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)
    # The tracker's train log-likelihood is the weighted one, of the final model.
    last = result.history[-1]
    assert last.update == 12
    expected = bl.log_likelihood(first, _rows().float(), last.log_z, sample_weights=COUNTS)
    assert last.train_log_likelihood == pytest.approx(expected, rel=1e-12)
    assert not math.isclose(last.train_log_likelihood, bl.log_likelihood(first, _rows().float(), last.log_z))
    # The base was fitted to the weighted marginals.
    reference = bl.RBM(n_visible=7, n_hidden=3).set_base_rate(_rows().repeat_interleave(COUNTS, 0))
    torch.testing.assert_close(first.base_logits, reference.base_logits)
    assert first.metadata["training"]["weighted"] is True
    # Resuming with other weights is refused (they are fingerprinted with the data).
    _weighted_run(tmp_path)
    with pytest.raises(ValidationError, match="sample weights differ"):
        _weighted_run(tmp_path, weights=COUNTS.flip(0), n_updates=20, resume=True)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (torch.ones(8), r"must have shape \(9,\)"),
        (torch.ones(9, 1), r"must have shape \(9,\)"),
        (torch.tensor([1.0] * 8 + [math.nan]), "must be finite; entry 8 is nan"),
        (torch.tensor([1.0] * 3 + [-2.0] + [1.0] * 5), "must be non-negative; entry 3 is -2.0"),
        (torch.zeros(9), "sum to 0"),
        ("heavy", "could not be read|must have shape"),
    ],
)
def test_bad_weights_are_refused(weights, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        bl.train(_rbm(), _rows(), sample_weights=weights, batch_size=3, n_updates=1)
    with pytest.raises(ValidationError, match=message):
        bl.log_likelihood(_rbm(), _rows(), 1.0, sample_weights=weights)


def test_a_base_without_weights_is_refused() -> None:
    data = torch.randn(9, 4, generator=torch.Generator().manual_seed(2))
    with pytest.raises(ValidationError, match="cannot be fitted to weighted data"):
        bl.train(
            GaussianRBM(n_visible=4, n_hidden=2, generator=0),
            data,
            sample_weights=COUNTS,
            batch_size=3,
            n_updates=1,
        )

"""A certified lower bound on ``log Z`` from the states that chains visit (docs/trust.md).

For a binary RBM the unnormalised marginal of one layer, with the other summed out exactly,
is cheap: ``log f(h) = c·h + Σ_i softplus(b_i + (W h)_i)`` and ``log f(v) = b·v + Σ_j
softplus(c_j + (vᵀW)_j)`` (a spin RBM's is its equal 0/1 RBM's less ``Σ_i b_i``); for a Potts RBM each categorical site sums out as a log-sum-exp
over its states (:meth:`~boltzlab.models.potts_rbm.PottsRBM.hidden_log_f`). ``Z`` is the sum of ``f`` over every state of that layer, so the
sum over *any* set of distinct states is a lower bound on ``Z``, with no randomness in the
inequality: whatever the chains did, ``log Σ_{s ∈ visited} f(s) ≤ log Z``. An estimate that
falls below this bound by more than 3 of its standard errors is wrong, full stop — which is how a
sharply trained model's missing mass is caught without enumerating it.

Chains started from data find the modes the data sit in, which annealing from the base can
miss; chains started from the base find what annealing finds. The bound sums over the
smaller layer (fewer distinct states carry the mass) and is tight when a handful of states
hold nearly all of it, as on sharp PCD-trained models with tens of hidden units; it loosens
as that layer grows. How tight it is, is reported as a Good-Turing estimate of the mass the
visited set misses (the fraction of draws that hit a state seen only once), a heuristic on
correlated chains, not part of the certificate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn.functional import softplus

from boltzlab import distributed, progress
from boltzlab.chains import Chains
from boltzlab.models.potts_rbm import PottsRBM
from boltzlab.models.rbm import RBM
from boltzlab.models.spin_rbm import SpinRBM
from boltzlab.operators import resolve
from boltzlab.rng import resolve_generator
from boltzlab.validation import as_model_data, check_positive_int

__all__ = [
    "LowerBound",
    "certified_lower_bound",
    "log_f_layer",
    "supports_lower_bound",
    "unique_rows",
    "visited_states",
]

# Bits per packed word: 62 keeps every code a non-negative int64 (sign bit and one spare).
_BITS_PER_WORD = 62


@dataclass(frozen=True, slots=True)
class LowerBound:
    """``log Σ f(s)`` over the distinct states ``s`` of one layer that the chains visited.

    Attributes
    ----------
    log_z : float
        The certified lower bound on ``log Z`` (nats).
    layer : {"visible", "hidden"}
        The layer whose states were collected (the other is summed out exactly).
    n_states : int
        Distinct states in the sum.
    n_draws : int
        States collected (chains × (sweeps + 1), the starting states included).
    missing_mass : float
        Good-Turing estimate of the probability mass outside the visited set, in [0, 1]:
        the fraction of draws that hit a state seen exactly once. Near 0 means the bound is
        likely tight; near 1 means it says little (typical for a layer of hundreds of units).
    started_from : {"data", "data and base", "witness rows", "witness rows and base", "base"}
        Where the chains started ("witness rows": the rows a model keeps, docs/trust.md).
    cost_sweeps : int
        Chain-sweeps spent (chains × sweeps).
    """

    log_z: float
    layer: str
    n_states: int
    n_draws: int
    missing_mass: float
    started_from: str
    cost_sweeps: int

    @property
    def tight(self) -> bool:
        """Whether the visited set seems to hold almost all the mass (missing mass < 1%)."""
        return self.missing_mass < 0.01


def supports_lower_bound(model: Any) -> bool:
    """Whether :func:`certified_lower_bound` can bound ``model`` (binary, spin and Potts RBMs)."""
    return isinstance(model, (RBM, SpinRBM, PottsRBM))


def bound_layer(model: RBM | SpinRBM | PottsRBM) -> str:
    """The layer whose visited states are summed: the one with fewer states (``2^J`` against
    ``2^D``, or ``q^L`` for categorical sites)."""
    if isinstance(model, PottsRBM):
        return "hidden" if model.n_hidden <= model.n_sites * math.log2(model.n_states) else "visible"
    return "hidden" if model.n_hidden <= model.n_visible else "visible"


def pack_rows(states: Tensor) -> Tensor:
    """Rows of 0/1 values as rows of int64 words (62 bits each); shape ``(n, ceil(units/62))``."""
    n, units = states.shape
    n_words = max(1, math.ceil(units / _BITS_PER_WORD))
    padded = torch.zeros(n, n_words * _BITS_PER_WORD, dtype=torch.int64, device=states.device)
    padded[:, :units] = states.to(torch.int64)
    powers = torch.pow(
        torch.tensor(2, dtype=torch.int64, device=states.device),
        torch.arange(_BITS_PER_WORD, dtype=torch.int64, device=states.device),
    )
    return (padded.view(n, n_words, _BITS_PER_WORD) * powers).sum(2)


def _unpack_rows(codes: Tensor, units: int, dtype: torch.dtype) -> Tensor:
    """Inverse of :func:`pack_rows`; shape ``(n, units)`` in ``dtype``."""
    shifts = torch.arange(_BITS_PER_WORD, dtype=torch.int64, device=codes.device)
    bits = (codes[:, :, None] >> shifts) & 1
    return bits.reshape(codes.shape[0], -1)[:, :units].to(dtype)


def log_f_layer(model: RBM | SpinRBM | PottsRBM, states: Tensor, layer: str) -> Tensor:
    """``log f(s)`` at β = 1 of states of ``layer`` with the other layer summed out; float64."""
    if isinstance(model, PottsRBM):  # sites summed out by a log-sum-exp each, or one-hot rows
        return model.hidden_log_f(states) if layer == "hidden" else model.visible_log_f(states)
    if isinstance(model, SpinRBM):  # the equal 0/1 RBM's, less the constant Σ_i b_i
        return log_f_layer(model.binary_rbm(), states, layer) - model.spin_offset()
    weights = model.weights.detach().to(torch.float64)
    b = model.visible_bias.detach().to(torch.float64)
    c = model.hidden_bias.detach().to(torch.float64)
    s = states.to(torch.float64)
    if layer == "hidden":
        return s @ c + softplus(b + s @ weights.t()).sum(1)
    return s @ b + softplus(c + s @ weights).sum(1)


@dataclass(frozen=True, slots=True)
class VisitedStates:
    """The distinct states of one layer that chains at β = 1 visited, with ``log f`` of each.

    Attributes
    ----------
    layer : {"visible", "hidden"}
        The smaller layer (the other is summed out exactly in ``log_f``).
    codes : Tensor, shape (n_states, ceil(units / 62)), int64
        Distinct states packed 62 bits to a word (:func:`pack_rows`), in no particular order;
        :meth:`states` unpacks them.
    units : int
        Units of ``layer``.
    log_f : Tensor, shape (n_states,), float64
        Unnormalised log marginal of each state at β = 1 (nats).
    counts : Tensor, shape (n_states,), int64
        How often each state was drawn (starting states included).
    started_from : {"data", "data and base", "base"}
    cost_sweeps : int
        Chain-sweeps spent (chains × sweeps).
    """

    layer: str
    codes: Tensor
    units: int
    log_f: Tensor
    counts: Tensor
    started_from: str
    cost_sweeps: int

    def states(self, dtype: torch.dtype = torch.float64, block: int = 65536) -> Iterator[Tensor]:
        """The states as 0/1 rows, ``block`` at a time (shape ``(≤ block, units)``), in ``codes`` order."""
        for chunk in self.codes.split(block):
            yield _unpack_rows(chunk, self.units, dtype)

    def subset(self, keep: Tensor) -> VisitedStates:
        """The states where the boolean mask ``keep`` (shape ``(n_states,)``) holds."""
        return dataclasses.replace(
            self, codes=self.codes[keep], log_f=self.log_f[keep], counts=self.counts[keep]
        )

    @property
    def log_z(self) -> float:
        """``log Σ f(s)`` over the visited states: a certified lower bound on ``log Z``."""
        return float(torch.logsumexp(self.log_f, 0))

    @property
    def missing_mass(self) -> float:
        """Good-Turing estimate of the mass outside the visited set (draws of states seen once)."""
        return int((self.counts == 1).sum()) / max(1, int(self.counts.sum()))

    def bound(self) -> LowerBound:
        """The certified lower bound these states give."""
        return LowerBound(
            log_z=self.log_z,
            layer=self.layer,
            n_states=int(self.codes.shape[0]),
            n_draws=int(self.counts.sum()),
            missing_mass=self.missing_mass,
            started_from=self.started_from,
            cost_sweeps=self.cost_sweeps,
        )


def certified_lower_bound(
    model: RBM,
    *,
    data: Any = None,
    n_chains: int = 1000,
    n_sweeps: int = 200,
    operator: Any = "gibbs",
    generator: torch.Generator | int | None = None,
    data_label: str = "data",
) -> LowerBound:
    """A certified lower bound on ``log Z`` of a binary RBM from the states chains visit.

    Parameters
    ----------
    model : RBM
    data : Tensor or array, shape (n_examples, n_visible), optional
        Starting states: up to ``n_chains`` rows (drawn without replacement when there are
        more; when there are fewer, the other chains start from the base). Without data the
        chains start from exact base samples.
    n_chains : int, default 1000
    n_sweeps : int, default 200
        Sweeps at β = 1; the states of every sweep (and the starting states) are collected.
    operator : str or Operator, default "gibbs"
    generator : torch.Generator or int, optional
    data_label : str, default "data"
        What ``data`` is, in ``started_from`` (``"witness rows"`` for a model's kept rows).

    Returns
    -------
    LowerBound
        ``log_z`` never exceeds the exact ``log Z`` (up to float64 rounding).
    """
    visited = visited_states(
        model,
        data=data,
        n_chains=n_chains,
        n_sweeps=n_sweeps,
        operator=operator,
        generator=generator,
        data_label=data_label,
    )
    return visited.bound()


def visited_states(
    model: RBM,
    *,
    data: Any = None,
    n_chains: int = 1000,
    n_sweeps: int = 200,
    operator: Any = "gibbs",
    generator: torch.Generator | int | None = None,
    data_label: str = "data",
) -> VisitedStates:
    """The distinct states of the smaller layer that chains at β = 1 visit, with their ``log f``.

    Parameters as :func:`certified_lower_bound`, which sums these states.
    """
    if not supports_lower_bound(model):
        raise TypeError(f"the visited-state sum needs a binary or Potts RBM, got {type(model).__name__}")
    n_chains = check_positive_int(n_chains, "n_chains")
    n_sweeps = int(n_sweeps)
    transition = resolve(operator)
    generator = resolve_generator(generator, model.device)
    layer = bound_layer(model)
    index = 1 if layer == "hidden" else 0
    with torch.no_grad():
        if data is not None:
            rows = as_model_data(model, data, "data")
            if rows.shape[0] > n_chains:
                pick = torch.randperm(rows.shape[0], generator=generator, device=model.device)[:n_chains]
                rows = rows[pick]
            chains = model.chains_from(rows, generator=generator, beta=1.0)
            started_from = data_label
            if rows.shape[0] < n_chains:
                # Few rows (RAISE's held-out examples, say): the rest start from the base, so
                # the bound is never weaker than the one without data.
                base = model.init_chains(n_chains - rows.shape[0], generator=generator).with_beta(1.0)
                chains = Chains.concatenate([chains, base])
                started_from = f"{data_label} and base"
        else:
            chains = model.init_chains(n_chains, generator=generator).with_beta(1.0)
            started_from = "base"
        all_chains, part = chains.n_chains, None
        if distributed.topology().active:
            # Under torchrun each process runs its blocks of the chains (docs/architecture.md,
            # "Scaling out"); the starts above were drawn alike on every process.
            chains, part = distributed.shard_chains(chains, generator)
            generator = part.generator  # type: ignore[assignment]  # rng duck-types it
        codes = [pack_rows(chains.layers[index])]
        for _ in range(n_sweeps):
            chains, _info = transition.step(model, chains, generator=generator)
            progress.advance(chains.n_chains)
            codes.append(pack_rows(chains.layers[index]))
            if len(codes) >= 64:
                # Collapse to distinct rows with their counts now and then, so memory stays
                # proportional to the distinct states rather than to chains × sweeps.
                codes = [_collapse(codes)]
        if part is not None:
            gathered = distributed.all_gather(_collapse(codes).cpu(), what="gathering the visited states")
            codes = [block.to(model.device) for block in gathered]
        distinct, counts = _distinct_with_counts(codes)
        units = model.n_hidden if layer == "hidden" else model.n_visible
        mine = distinct
        if part is not None:  # each process sums out its share of the states
            shares = distributed.block_sizes(distinct.shape[0], distributed.topology().world_size)
            start = sum(shares[: distributed.topology().rank])
            mine = distinct[start : start + shares[distributed.topology().rank]]
        # Unpacked a block at a time: 200,000 distinct states of 500 units would be 0.8 GB.
        log_f = torch.cat(
            [
                log_f_layer(model, _unpack_rows(chunk, units, torch.float64), layer)
                for chunk in mine.split(16384)
            ]
            or [torch.empty(0, dtype=torch.float64, device=model.device)]
        )
        if part is not None:
            log_f = distributed.gather_rows(log_f, what="gathering the visited states' log f")
    return VisitedStates(
        layer=layer,
        codes=distinct,
        units=units,
        log_f=log_f,
        counts=counts,
        started_from=started_from,
        cost_sweeps=all_chains * n_sweeps,
    )


def unique_rows(rows: Tensor) -> tuple[Tensor, Tensor]:
    """``torch.unique(rows, dim=0, return_inverse=True)`` of int64 rows ``(n, width)``: the
    distinct rows in ascending lexicographic order, and each row's index among them.

    Computed by one stable sort per column, last column first, and a comparison of neighbours:
    the same result as torch's, whose row-wise path took 0.24 s on 64,000 one-word rows against
    0.003 s for a sort of one column (the verdict's bound calls it for every estimate: about a
    tenth of the fast tests' time).
    """
    n, width = rows.shape
    if n == 0:
        return rows.clone(), torch.empty(0, dtype=torch.int64, device=rows.device)
    if width == 1:
        distinct, inverse = torch.unique(rows[:, 0], return_inverse=True)
        return distinct[:, None], inverse
    order = torch.arange(n, device=rows.device)
    for column in reversed(range(width)):
        order = order[torch.sort(rows[order, column], stable=True).indices]
    ordered = rows[order]
    first = torch.ones(n, dtype=torch.bool, device=rows.device)
    first[1:] = (ordered[1:] != ordered[:-1]).any(1)
    inverse = torch.empty(n, dtype=torch.int64, device=rows.device)
    inverse[order] = torch.cumsum(first, 0) - 1
    return ordered[first], inverse


# A collapsed block keeps its counts in a trailing column, so blocks can be merged again.
def _collapse(blocks: list[Tensor]) -> Tensor:
    distinct, counts = _distinct_with_counts(blocks)
    return torch.cat([distinct, -counts[:, None]], 1)


def _distinct_with_counts(blocks: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Distinct packed rows over ``blocks`` and how often each was drawn.

    A block is either raw packed rows (each drawn once) or the output of :func:`_collapse`,
    whose last column holds ``−count`` (negative, so it cannot be mistaken for a code word).
    """
    rows, weights = [], []
    for block in blocks:
        if block.shape[0] and bool((block[:, -1] < 0).all()):
            rows.append(block[:, :-1])
            weights.append(-block[:, -1])
        else:
            rows.append(block)
            weights.append(torch.ones(block.shape[0], dtype=torch.int64, device=block.device))
    stacked = torch.cat(rows)
    distinct, inverse = unique_rows(stacked)
    counts = torch.zeros(distinct.shape[0], dtype=torch.int64, device=stacked.device)
    counts.index_add_(0, inverse, torch.cat(weights))
    return distinct, counts

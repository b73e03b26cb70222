"""Exact sums over a DBM's states: one parity of layers enumerated, the other summed out.

Layers of one parity are conditionally independent given the other (docs/algorithms.md §1.2),
so with the layers ``rows`` enumerated and the layers ``columns`` summed out analytically,

    log f_β(rows) = constant + β·b_rows·s + Σ_k softplus(offset_k + (s·C)_k),

with ``C`` the block matrix of ``βW`` between the two parities (:meth:`DBMParameters64.coupling`)
and ``offset`` the summed layers' scaled biases (``(1 − β)·b^A`` added on the visible layer).
:func:`~boltzlab.models.rbm.enumerate_softplus_sums` does the sum over ``s``. Two uses:

* :func:`enumerate_parity_log_f`: every state of one parity, for ``log Z(β)``
  (:meth:`DBM.enumerate_log_f <boltzlab.models.dbm.DBM.enumerate_log_f>`);
* :func:`visible_log_f`: ``log Σ_h f_β(v, h)`` for given ``v``, the hidden layers of the
  smaller parity enumerated per example, for the exact ``log p(v)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab.models.base_rate import base_rate_log_norm
from boltzlab.models.rbm import all_binary_states, enumerate_softplus_sums
from boltzlab.numerics import softplus
from boltzlab.validation import require

__all__ = ["DBMParameters64"]

# The enumerated units: 2^40 states is the most a run can sum, 2^24 per example for log p(v).
_MAX_ENUMERATED = 40
_MAX_ENUMERATED_PER_EXAMPLE = 24
# Terms per chunk of the categorical enumeration (8 MB of float64).
_CHUNK_TERMS = 1 << 20


@dataclass(frozen=True, slots=True)
class DBMParameters64:
    """A DBM's parameters in float64 (detached): what exact computations read.

    Attributes
    ----------
    weights : tuple of Tensor
        ``weights[l]`` couples layers ``l`` and ``l + 1``, shape ``(n_l, n_{l+1})``.
    biases : tuple of Tensor
        ``biases[l]``, shape ``(n_l,)``, one per layer.
    base_logits : Tensor, shape (n_0,)
        ``b^A``, the base-rate log-odds of the visible layer.
    """

    weights: tuple[Tensor, ...]
    biases: tuple[Tensor, ...]
    base_logits: Tensor
    #: ``q`` when the visible layer is ``L`` categorical sites held one-hot (a Potts DBM), else None.
    visible_states: int | None = None

    @property
    def sizes(self) -> tuple[int, ...]:
        """``(n_0, …, n_L)``."""
        return tuple(bias.shape[0] for bias in self.biases)

    @property
    def parities(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(odd layers, even layers)``, the DBM's ``update_groups``."""
        n_layers = len(self.biases)
        return tuple(range(1, n_layers, 2)), tuple(range(0, n_layers, 2))

    def base_log_norm(self) -> Tensor:
        """``log`` of the base's normaliser, every hidden unit uniform; 0-dim float64.

        A binary visible unit contributes ``softplus(b^A_i)``, a categorical site
        ``logsumexp_a b^A_ia``.
        """
        if self.visible_states is None:
            return base_rate_log_norm(self.base_logits, sum(self.sizes[1:]))
        sites = self.base_logits.view(-1, self.visible_states)
        return torch.logsumexp(sites, 1).sum() + sum(self.sizes[1:]) * math.log(2.0)

    def coupling(self, rows: Sequence[int], columns: Sequence[int]) -> Tensor:
        """Block matrix of the weights from layers ``rows`` to layers ``columns``; float64.

        No two adjacent layers on one side; shape ``(Σ n_rows, Σ n_columns)``, zero blocks
        between layers that are not neighbours.
        """
        sizes = self.sizes
        blocks = []
        for row in rows:
            line = []
            for column in columns:
                if column == row + 1:
                    line.append(self.weights[row])
                elif column == row - 1:
                    line.append(self.weights[column].t())
                else:
                    line.append(self.weights[0].new_zeros(sizes[row], sizes[column]))
            blocks.append(torch.cat(line, dim=1))
        return torch.cat(blocks, dim=0)


def enumerate_parity_log_f(
    parameters: DBMParameters64, beta: float, *, chunk_states: int | None, enumerated: str
) -> Iterator[Tensor]:
    """Yield ``log f_β`` of every state of one parity of layers, the other summed out; float64.

    ``enumerated="even"`` enumerates ``(v, h², …)`` with the odd layers summed out;
    ``"odd"`` enumerates ``(h¹, h³, …)`` with the even layers summed out; ``"auto"`` takes
    the parity with fewer units (at most 40). The chunks' ``logsumexp`` is ``log Z(β)``.
    States come in chunks of ``chunk_states`` in the bit order of
    :func:`~boltzlab.models.rbm.all_binary_states` over the enumerated layers' units,
    concatenated in layer order.
    """
    require(
        enumerated in ("auto", "even", "odd"),
        f"enumerated must be 'auto', 'even' or 'odd', got {enumerated!r}",
    )
    sizes = parameters.sizes
    odd, even = parameters.parities
    if parameters.visible_states is not None:
        # Categorical sites are not bits: the odd layers are enumerated and the even ones,
        # the sites among them, summed out (a log-sum-exp per site).
        require(enumerated in ("auto", "odd"), "a Potts DBM enumerates its odd layers (enumerated='odd')")
        yield from _enumerate_odd_categorical(parameters, beta, chunk_states=chunk_states)
        return
    if enumerated == "auto":
        enumerated = "odd" if sum(sizes[i] for i in odd) < sum(sizes[i] for i in even) else "even"
    rows, columns = (even, odd) if enumerated == "even" else (odd, even)
    n_enumerated = sum(sizes[i] for i in rows)
    require(
        n_enumerated <= _MAX_ENUMERATED,
        f"exact enumeration of the {enumerated} layers needs at most {_MAX_ENUMERATED} units, "
        f"got {n_enumerated}",
    )
    biases, base = parameters.biases, parameters.base_logits

    def scaled_biases(layers: tuple[int, ...]) -> Tensor:
        parts = [beta * biases[i] + ((1.0 - beta) * base if i == 0 else 0.0) for i in layers]
        return torch.cat(parts)

    yield from enumerate_softplus_sums(
        beta * parameters.coupling(rows, columns),
        scaled_biases(columns),
        scaled_biases(rows),
        -(1.0 - beta) * float(parameters.base_log_norm()),
        chunk_states=chunk_states,
    )


def _enumerate_odd_categorical(
    parameters: DBMParameters64, beta: float, *, chunk_states: int | None
) -> Iterator[Tensor]:
    """``log f_β`` of every state of the odd layers, the even ones summed out, the visible
    layer being categorical sites: softplus for an even hidden unit, a log-sum-exp over the
    ``q`` states of a site (its input ``β(g + …) + (1 − β) b^A``); float64 chunks."""
    sizes, biases, q = parameters.sizes, parameters.biases, parameters.visible_states
    assert q is not None
    odd, even = parameters.parities
    n_odd = sum(sizes[i] for i in odd)
    require(
        n_odd <= _MAX_ENUMERATED,
        f"exact enumeration of a Potts DBM's odd layers needs at most {_MAX_ENUMERATED} units, got {n_odd}",
    )
    coupling = beta * parameters.coupling(odd, even)
    offset = torch.cat(
        [beta * biases[0] + (1.0 - beta) * parameters.base_logits, *(beta * biases[i] for i in even[1:])]
    )
    linear = beta * torch.cat([biases[i] for i in odd])
    constant = -(1.0 - beta) * float(parameters.base_log_norm())
    n_visible = sizes[0]
    if chunk_states is None:
        chunk_states = max(1, _CHUNK_TERMS // max(offset.numel(), 1))
    for start in range(0, 2**n_odd, chunk_states):
        states = all_binary_states(
            n_odd, start=start, stop=min(2**n_odd, start + chunk_states), device=coupling.device
        )
        inputs = torch.addmm(offset, states, coupling)
        sites = torch.logsumexp(inputs[:, :n_visible].reshape(states.shape[0], -1, q), 2).sum(1)
        yield constant + states @ linear + sites + softplus(inputs[:, n_visible:]).sum(1)


def visible_log_f(parameters: DBMParameters64, v: Tensor, beta: float) -> Tensor:
    """``log Σ_h f_β(v, h)`` for float64 ``v`` of shape ``(n, n_0)``; float64, shape ``(n,)``.

    Given ``v``, the hidden layers of one parity are independent given the other; the
    smaller parity (at most 24 units) is enumerated per example, ``v`` entering through
    layer 1 only.
    """
    sizes = parameters.sizes
    weights, biases = parameters.weights, parameters.biases
    odd, even = parameters.parities
    rows, columns = sorted((odd, even[1:]), key=lambda group: sum(sizes[i] for i in group))
    n_enumerated = sum(sizes[i] for i in rows)
    require(
        n_enumerated <= _MAX_ENUMERATED_PER_EXAMPLE,
        f"the exact free energy of v enumerates the smaller parity of hidden layers, here "
        f"{n_enumerated} units (at most {_MAX_ENUMERATED_PER_EXAMPLE}); pass the even layers instead",
    )
    coupling = beta * parameters.coupling(rows, columns)
    row_biases = beta * torch.cat([biases[i] for i in rows])
    column_biases = beta * torch.cat([biases[i] for i in columns])
    from_visible = beta * (v @ weights[0])  # the input to layer 1, first in the odd group
    base = parameters.base_logits
    constant = v @ (beta * biases[0] + (1.0 - beta) * base) - (1.0 - beta) * parameters.base_log_norm()
    totals = []
    for example in range(v.shape[0]):
        linear, offset = row_biases.clone(), column_biases.clone()
        (linear if 1 in rows else offset)[: sizes[1]] += from_visible[example]
        chunks = enumerate_softplus_sums(coupling, offset, linear, 0.0, chunk_states=None)
        totals.append(torch.logsumexp(torch.stack([torch.logsumexp(c, 0) for c in chunks]), 0))
    return constant + torch.stack(totals)

"""Categorical (Potts) visible units and binary hidden units: the RBM of aligned sequences.

**Units.** Each of the ``L`` visible *sites* takes one of ``q`` states (20 amino acids and a
gap for proteins). Inside the library a site is one-hot: the visible layer of a chain is a
0/1 tensor of width ``L·q`` with exactly one 1 per site, site ``i``'s states in columns
``i·q … i·q + q − 1``. Outside it (data, samples written to FASTA) a sequence is ``L`` symbol
indices; :meth:`PottsRBM.validate_data` turns either form into the one-hot one and
:meth:`PottsRBM.to_indices` turns it back.

**Energy.** With ``v`` one-hot and ``h ∈ {0,1}^J``,

    E(v, h) = −Σ_{i,a,j} v_ia W_iaj h_j − Σ_{i,a} g_ia v_ia − Σ_j c_j h_j,

the binary RBM's energy on the flattened one-hot layer, so ``weights`` is stored as an
``(L·q, J)`` matrix (``potts_weights`` is its ``(L, q, J)`` view), ``visible_bias`` (the
fields ``g``) as ``(L·q,)``. The hidden conditional is the RBM's, ``σ(c + vW)``; the visible
one is a softmax per site over ``g_i + W_i h``.

**Tempered family** (docs/algorithms.md §1.3). The base is the independent-site (profile)
model with a pseudocount, fitted to the (weighted) data by :meth:`PottsRBM.set_base_rate`:
``b^A_ia = log f_ia`` with ``f_i = (1 − λ)·(data frequencies at site i) + λ/q``, and every
hidden unit uniform:

    log p1(v, h) = Σ_ia v_ia b^A_ia − Σ_i logsumexp_a b^A_ia − J log 2.

This is the binary base-rate model with ``softplus`` (the log normaliser of one binary unit)
replaced by a per-site ``logsumexp``. At β the site logits are ``β·(g_i + W_i h) + (1 − β)·b^A_i``
(:meth:`conditional_logits`), and with the hidden units summed out ``log f_β(v)`` has the
:class:`~boltzlab.models.base.MarginalTerms` form, so AIS, RAISE, RTS, TS, TI, TI-RB and MBAR
work unchanged.

**Exact log Z(β)** by enumerating the smaller side: the ``2^J`` hidden states with every site
summed out in closed form,

    log f_β(h) = β c·h − (1 − β)·(Σ_i logsumexp b^A_i + J log 2) + Σ_i logsumexp_a (β(g + Wh)_ia + (1 − β) b^A_ia),

or the ``q^L`` sequences with the hidden units summed out, whichever is fewer.

**Gauge.** ``E`` is unchanged by ``W_iaj → W_iaj + u_ij`` with ``c_j → c_j − Σ_i u_ij``, and
the distribution by ``g_ia → g_ia + s_i``. Training without fixing these directions lets
them drift (the gradient of ``Σ_a W_iaj`` is that of ``c_j``), so :meth:`apply_gauge_` moves
the parameters to the zero-sum gauge ``Σ_a W_iaj = 0``, ``Σ_a g_ia = 0`` after each update,
compensating ``c`` so that the distribution is exactly unchanged (log Z shifts by the fields'
removed constant, and every log-likelihood stays the same).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from boltzlab import gemm
from boltzlab.data.sequences import Alphabet
from boltzlab.errors import ValidationError
from boltzlab.io import register_model_kind
from boltzlab.models.base import MarginalTerms, all_ones, log_f_marginal
from boltzlab.models.base_rate import BaseRateModel
from boltzlab.models.bipartite import BipartiteModel
from boltzlab.models.categorical import (
    CategoricalVisible,
    all_categorical_states,
    alphabet_record,
    categorical_shape,
    gauge_visible_coupling_,
    logsumexp_sites,
)
from boltzlab.models.files import potts_rbm_kind
from boltzlab.models.parameters import check_dtype
from boltzlab.models.rbm import RBM, all_binary_states, enumeration_chunk_terms
from boltzlab.models.witness import WitnessRows
from boltzlab.numerics import softplus
from boltzlab.sparse_product import sparse_addmm
from boltzlab.sparse_product import uses_kernel as uses_sparse_product
from boltzlab.validation import check_device, require

# all_categorical_states lives in boltzlab.models.categorical; it stays importable from here.
__all__ = ["PottsRBM", "all_categorical_states"]

# The most states an enumeration may visit (either side): 2^40, as for the binary RBM.
_MAX_ENUMERATED_BITS = 40


class PottsRBM(CategoricalVisible, WitnessRows, BaseRateModel, BipartiteModel, nn.Module):
    """An RBM with categorical (Potts) visible units and binary hidden units.

    Parameters
    ----------
    n_sites, n_states, n_hidden : int, optional
        ``L`` sites of ``q ≥ 2`` states each and ``J`` hidden units, when no ``weights`` are
        given. Weights are drawn from N(0, ``weight_std``²) with ``generator`` and moved to
        the zero-sum gauge; biases start at zero.
    weights : Tensor, shape (L, q, J) or (L·q, J), optional
        With ``(L·q, J)``, give ``n_states`` too.
    visible_bias : Tensor, shape (L, q) or (L·q,), optional
        The fields ``g``.
    hidden_bias : Tensor, shape (J,), optional
    alphabet : str or Alphabet, optional
        The symbols of the states (``"protein"``, ``"rna"``, ``"dna"``, ``"custom:…"``): kept
        in the model's metadata, so that samples can be written as sequences.
    dtype, device, generator, weight_std
        As for :class:`~boltzlab.models.rbm.RBM`.

    Attributes
    ----------
    weights : Parameter, shape (L·q, J)
    visible_bias : Parameter, shape (L·q,)
    hidden_bias : Parameter, shape (J,)
    base_logits : buffer, shape (L·q,)
        ``b^A``, the profile base's log-probabilities per site (zeros: the uniform base).
    layer_kinds : ("categorical", "binary")
    layer_states : (q, 2)
        States per unit of each layer, as the operators read them.

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> model = bl.models.PottsRBM(n_sites=4, n_states=3, n_hidden=2, generator=0)
    >>> sequences = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    >>> model = model.set_base_rate(sequences)
    >>> bl.log_likelihood(model, sequences, bl.exact_log_z(model)) < 0
    True
    """

    _article = "a"
    layer_kinds: tuple[str, ...] = ("categorical", "binary")

    def __init__(
        self,
        n_sites: int | None = None,
        n_states: int | None = None,
        n_hidden: int | None = None,
        *,
        weights: Tensor | None = None,
        visible_bias: Tensor | None = None,
        hidden_bias: Tensor | None = None,
        alphabet: str | Alphabet | None = None,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
        generator: torch.Generator | int | None = None,
        weight_std: float = 0.01,
    ) -> None:
        super().__init__()
        n_sites, n_states, weights, symbols = categorical_shape(
            n_sites, n_states, weights, alphabet, model="PottsRBM"
        )
        if visible_bias is not None:
            visible_bias = torch.as_tensor(visible_bias).reshape(-1)
        self.n_states = n_states
        self._init_bipartite(
            n_sites * n_states,
            n_hidden,
            weights,
            visible_bias,
            hidden_bias,
            dtype=check_dtype(dtype),
            device=check_device(device),
            generator=generator,
            weight_std=weight_std,
            base_logits=True,
        )
        if symbols is not None:
            self.metadata["alphabet"] = alphabet_record(symbols)
        if weights is None:
            self.apply_gauge_()

    # ------------------------------------------------------------------ shape and symbols
    @property
    def potts_weights(self) -> Tensor:
        """``W`` as a ``(L, q, J)`` view of ``weights`` (shares its storage)."""
        return self.weights.view(self.n_sites, self.n_states, self.n_hidden)

    @property
    def fields(self) -> Tensor:
        """``g`` as a ``(L, q)`` view of ``visible_bias``."""
        return self.visible_bias.view(self.n_sites, self.n_states)

    def extra_repr(self) -> str:
        base = "profile" if self.base_fitted else "uniform"
        return (
            f"n_sites={self.n_sites}, n_states={self.n_states}, n_hidden={self.n_hidden}, "
            f"dtype={self.dtype}, base={base}"
        )

    def _fields(self) -> Tensor:
        return self.visible_bias

    # ------------------------------------------------------------------ gauge
    @torch.no_grad()
    def apply_gauge_(self) -> PottsRBM:
        """Move to the zero-sum gauge without changing the distribution; returns ``self``.

        ``W_iaj −= mean_a W_iaj`` with ``c_j += Σ_i mean_a W_iaj`` (the energy of every
        state is unchanged), and ``g_ia −= mean_a g_ia`` (every energy shifts by the same
        constant, so log Z shifts by it and every log-likelihood is unchanged).
        """
        gauge_visible_coupling_(self.weights, self.visible_bias, self.hidden_bias, self.n_states)
        return self

    # ------------------------------------------------------------------ densities
    # The binary RBM's energy, read on the one-hot layer: the same expression of the
    # flattened (L·q, J) parameters.
    energy = RBM.energy

    def marginal_terms(self, layers: tuple[Tensor, ...] | Tensor) -> MarginalTerms:
        """Summed-out pieces for one-hot visible states (``layers`` or just ``v``, shape ``(n, L·q)``)."""
        v = layers[0] if isinstance(layers, tuple) else layers
        with torch.no_grad():
            preactivation = self._hidden_input(v)
            base = self._base_log_p1(v)
            linear = v.to(torch.float64) @ self.visible_bias.to(torch.float64)
        return MarginalTerms(base=base, linear=linear, preactivation=preactivation)

    def free_energy(self, v: Tensor, beta: Tensor | float = 1.0) -> Tensor:
        """``−log f_β(v)`` with the hidden units summed out; float64, shape ``(n,)``."""
        return -log_f_marginal(self.marginal_terms(v), beta)

    def hidden_log_f(self, h: Tensor, beta: float = 1.0) -> Tensor:
        """``log f_β(h)``, every site summed out in closed form; float64, shape ``(n,)``."""
        h64 = h.to(torch.float64)
        beta = float(beta)
        weights = self.weights.detach().to(torch.float64)
        g = self.visible_bias.detach().to(torch.float64)
        base = self.base_logits.detach().to(torch.float64)
        logits = torch.addmm(beta * g + (1.0 - beta) * base, h64, beta * weights.t())
        constant = -(1.0 - beta) * float(self._base_log_norm())
        return (
            beta * (h64 @ self.hidden_bias.detach().to(torch.float64))
            + constant
            + logsumexp_sites(logits, self.n_states)
        )

    # ------------------------------------------------------------------ sampling
    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Layer ``index``'s logits given the other, at per-chain β; shape ``(n, size)``.

        Hidden (1): log-odds ``β·(c + vW)``. Visible (0): per-site unnormalised log-probabilities
        ``β·(g + Wh) + (1 − β)·b^A`` (a softmax over each site's ``q`` columns gives its conditional).
        """
        with torch.no_grad():
            if index == 1:
                logits = self._hidden_input(layers[0])
                return logits if all_ones(beta) else logits.mul_(beta[:, None])
            if index == 0:
                return self._visible_logits(self.visible_bias, layers[1], self.weights, beta)
        raise ValidationError(f"a PottsRBM has layers 0 and 1, got index {index}")

    def _hidden_input(self, v: Tensor) -> Tensor:
        """``c + vW`` of one-hot rows ``v`` (a new tensor): the ``L`` rows of ``W`` each row selects,
        added by :func:`boltzlab.sparse_product.sparse_addmm` on the CPU (a dense product would
        spend ``q`` times the work on zeros), else :func:`boltzlab.gemm.addmm`."""
        if uses_sparse_product(v, self.weights):
            return sparse_addmm(self.hidden_bias, v, self.weights)
        return gemm.addmm(self.hidden_bias, v, self.weights)

    # ------------------------------------------------------------------ enumeration
    def enumerate_log_f(self, beta: float = 1.0, *, chunk_states: int | None = None) -> Iterator[Tensor]:
        """Yield ``log f_β`` of every state of the smaller side, the other summed out; float64.

        The ``2^J`` hidden states (sites summed out) when ``2^J ≤ q^L``, else the ``q^L``
        sequences (hidden units summed out), in chunks of ``chunk_states``.
        """
        beta = float(beta)
        hidden_bits = self.n_hidden
        visible_bits = self.n_sites * math.log2(self.n_states)
        require(
            min(hidden_bits, visible_bits) <= _MAX_ENUMERATED_BITS,
            f"exact enumeration needs 2^n_hidden or n_states^n_sites <= 2^{_MAX_ENUMERATED_BITS}, got "
            f"2^{hidden_bits} and {self.n_states}^{self.n_sites}",
        )
        if hidden_bits <= visible_bits:
            per_state = self.n_visible
            total = 2**hidden_bits
        else:
            per_state = self.n_hidden
            total = self.n_states**self.n_sites
        if chunk_states is None:
            chunk_states = max(1, enumeration_chunk_terms(self.device) // max(per_state, 1))
        for start in range(0, total, chunk_states):
            stop = min(total, start + chunk_states)
            if hidden_bits <= visible_bits:
                h = all_binary_states(self.n_hidden, start=start, stop=stop, device=self.device)
                yield self.hidden_log_f(h, beta)
            else:
                v = all_categorical_states(
                    self.n_sites,
                    self.n_states,
                    start=start,
                    stop=stop,
                    dtype=torch.float64,
                    device=self.device,
                )
                yield self.visible_log_f(v, beta)

    def visible_log_f(self, v: Tensor, beta: float = 1.0) -> Tensor:
        """``log f_β(v)`` of one-hot rows ``(n, L·q)``, hidden units summed out, in float64
        throughout (the precision of enumeration and of the certified bound); shape ``(n,)``."""
        beta = float(beta)
        v = v.to(torch.float64)
        weights = self.weights.detach().to(torch.float64)
        c = self.hidden_bias.detach().to(torch.float64)
        g = self.visible_bias.detach().to(torch.float64)
        base = v @ self.base_logits.detach().to(torch.float64) - self._base_log_norm()
        summed = softplus(beta * torch.addmm(c, v, weights)).sum(1)
        return (1.0 - beta) * base + beta * (v @ g) + summed


register_model_kind(potts_rbm_kind(PottsRBM))

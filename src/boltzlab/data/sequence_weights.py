"""Sequence weights and homology-aware splits of an alignment, by pairwise identity.

Alignments of a protein family over-represent some branches of its tree: many near-copies of
a few sequences. The usual correction (Morcos et al. 2011, PNAS 108:E1293; Ekeberg et al.
2013) weighs each sequence by one over the number of sequences — itself included — within a
chosen identity, 80% by default, and counts the family by the sum of the weights, the
*effective number of sequences* (docs/data.md, "Aligned sequences").

**Identity** of two aligned sequences is the fraction of their ``L`` columns that hold the
same symbol, the gap included (two gaps in one column agree); "within 80%" means identity
≥ 0.8, i.e. at least ``⌈0.8·L⌉`` equal columns (the float product is rounded down first
when it is within 1e-9 of an integer, so 0.8·30 counts as 24, not 25).

**How it is computed.** The number of equal columns of every pair is one matrix product of
one-hot encodings, done ``block`` rows at a time against all ``N``, so memory is
``block × N`` counts plus the ``N × L·q`` one-hot matrix, never ``N × N``: 50,000 sequences of
length 53 take a 221 MB one-hot matrix and 64 MB blocks. Counts are exact: float32 holds
integers up to 2^24 exactly, far above any ``L``.

**Homology-aware splits** (:func:`homology_split`) keep every test sequence below the
identity threshold to every training sequence: sequences linked by a chain of pairs within
the threshold (single linkage) form a group, and whole groups go to the test split. A random
split would put near-copies on both sides and measure memory, not generalisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from torch import Tensor

from boltzlab.errors import DataError
from boltzlab.rng import resolve_generator

__all__ = [
    "DEFAULT_IDENTITY",
    "HomologySplit",
    "IdentityGraph",
    "effective_number",
    "homology_split",
    "identity_graph",
    "identity_neighbours",
    "sequence_weights",
]

DEFAULT_IDENTITY = 0.8
#: Pair counts held at once: ``block × N`` float32 values (64 MB).
_BLOCK_VALUES = 16_000_000


def _check(sequences: Tensor, q: int, identity: float) -> None:
    if not isinstance(sequences, Tensor) or sequences.dim() != 2 or sequences.dtype.is_floating_point:
        raise DataError("sequences must be an integer tensor of symbol indices, shape (N, L)")
    if sequences.numel() == 0:
        raise DataError(f"sequences is empty (shape {tuple(sequences.shape)})")
    if int(sequences.min()) < 0 or int(sequences.max()) >= q:
        raise DataError(f"sequences must hold symbol indices in 0 … {q - 1} (q = {q})")
    if not (isinstance(identity, int | float) and 0.0 < identity <= 1.0):
        raise DataError(f"identity must be a fraction in (0, 1], got {identity!r}")


def _min_equal_columns(length: int, identity: float) -> int:
    product = identity * length
    nearest = round(product)
    return nearest if abs(product - nearest) < 1e-9 else math.ceil(product)


def _blocks(sequences: Tensor, q: int, identity: float, block: int | None):
    """Yield ``(start, within)``: rows ``start …`` and whether each pair is within ``identity``."""
    n, length = sequences.shape
    one_hot = torch.nn.functional.one_hot(sequences.long(), q).reshape(n, length * q).to(torch.float32)
    threshold = _min_equal_columns(length, identity) - 0.5  # counts are exact integers
    rows = block if block is not None else max(1, min(n, _BLOCK_VALUES // n))
    transposed = one_hot.T.contiguous()
    for start in range(0, n, rows):
        equal = one_hot[start : start + rows] @ transposed
        yield start, equal > threshold


def identity_neighbours(
    sequences: Tensor, q: int, identity: float = DEFAULT_IDENTITY, *, block: int | None = None
) -> Tensor:
    """Number of sequences within ``identity`` of each one, itself included; shape ``(N,)``, int64."""
    _check(sequences, q, identity)
    counts = torch.empty(sequences.shape[0], dtype=torch.int64, device=sequences.device)
    for start, within in _blocks(sequences, q, identity, block):
        counts[start : start + within.shape[0]] = within.sum(1)
    return counts


def sequence_weights(
    sequences: Tensor, q: int, identity: float = DEFAULT_IDENTITY, *, block: int | None = None
) -> Tensor:
    """``1 / (number of sequences within identity)`` per sequence; shape ``(N,)``, float64.

    Parameters
    ----------
    sequences : Tensor, shape (N, L), integer
        Symbol indices (:attr:`~boltzlab.data.sequences.Alignment.sequences`).
    q : int
        Alphabet size.
    identity : float, default 0.8
        The fraction of equal columns at or above which two sequences count as one another's
        neighbours; 1.0 counts exact duplicates only.
    block : int, optional
        Rows per matrix product (default: as many as keep ``block × N`` under 16M values).
    """
    return 1.0 / identity_neighbours(sequences, q, identity, block=block).to(torch.float64)


def effective_number(weights: Tensor) -> float:
    """The effective number of sequences, ``Σ weights``."""
    return float(weights.to(torch.float64).sum())


@dataclass(frozen=True, slots=True)
class HomologySplit:
    """Indices of a split that keeps close homologues on one side.

    Attributes
    ----------
    train, test : Tensor, int64
        Row indices of the alignment, sorted.
    identity : float
        No test sequence is within this identity of a training sequence.
    n_groups : int
        Groups of sequences linked by chains of pairs within ``identity``.
    largest_group : int
        Sequences in the largest group.
    """

    train: Tensor
    test: Tensor
    identity: float
    n_groups: int
    largest_group: int


@dataclass(frozen=True, slots=True)
class IdentityGraph:
    """The pairs within an identity, as what weights and splits need: counts and groups.

    One pass of the block products gives both, so an alignment that is weighted and split
    (``boltzlab train --data family.fasta``) pays for the ``N × N`` comparison once.

    Attributes
    ----------
    neighbours : Tensor, shape (N,), int64
        Sequences within ``identity`` of each one, itself included (:func:`identity_neighbours`).
    groups : Tensor, shape (N,), int64
        The group of each sequence: single-linkage components of the pairs within
        ``identity``, numbered from 0.
    identity : float
    """

    neighbours: Tensor
    groups: Tensor
    identity: float

    @property
    def n_groups(self) -> int:
        return int(self.groups.max()) + 1 if self.groups.numel() else 0

    def subset(self, rows: Tensor) -> IdentityGraph:
        """The graph of the sequences ``rows`` alone, valid when no pair within ``identity``
        joins them to a sequence outside (``rows`` is a union of whole groups, as the two sides
        of a homology split are): their neighbours all lie inside, so the counts stand."""
        groups = self.groups[rows]
        _, renumbered = torch.unique(groups, return_inverse=True)
        return IdentityGraph(self.neighbours[rows], renumbered.reshape(-1), self.identity)


def identity_graph(
    sequences: Tensor, q: int, identity: float = DEFAULT_IDENTITY, *, block: int | None = None
) -> IdentityGraph:
    """Neighbour counts and single-linkage groups of the pairs within ``identity``, in one pass.

    Parameters as :func:`sequence_weights`; ``1 / graph.neighbours`` are the sequence weights.
    """
    _check(sequences, q, identity)
    n = sequences.shape[0]
    counts = torch.empty(n, dtype=torch.int64)
    rows, columns = [], []
    for start, within in _blocks(sequences, q, identity, block):
        counts[start : start + within.shape[0]] = within.sum(1).cpu()
        # Each pair once: global column > global row, i.e. local column ≥ local row + start + 1.
        pairs = torch.nonzero(torch.triu(within, diagonal=start + 1))
        rows.append(pairs[:, 0].cpu().numpy() + start)
        columns.append(pairs[:, 1].cpu().numpy())
    row = np.concatenate(rows)
    graph = coo_matrix((np.ones(row.size, dtype=np.int8), (row, np.concatenate(columns))), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    return IdentityGraph(counts, torch.from_numpy(labels.astype(np.int64)), float(identity))


def homology_split(
    sequences: Tensor,
    q: int,
    test_fraction: float,
    *,
    identity: float = DEFAULT_IDENTITY,
    generator: torch.Generator | int | None = None,
    block: int | None = None,
    graph: IdentityGraph | None = None,
) -> HomologySplit:
    """Split an alignment so that no test sequence is within ``identity`` of a training one.

    Groups (single-linkage components of the graph of pairs within ``identity``) are put in
    the test split in a random order until it holds at least ``test_fraction`` of the
    sequences; a group that would take the test split past twice that is skipped, so the
    fraction lands near the request when the groups allow it.

    Parameters
    ----------
    sequences : Tensor, shape (N, L), integer
    q : int
    test_fraction : float in (0, 1)
    identity : float, default 0.8
    generator : torch.Generator or int, optional
        The order in which groups are drawn.
    block : int, optional
        As in :func:`sequence_weights`.
    graph : IdentityGraph, optional
        The groups of ``sequences`` at ``identity``, already computed (:func:`identity_graph`);
        the split is then the same as without it, at no further cost.

    Raises
    ------
    DataError
        When the groups cannot make a test split (one group holds almost everything): lower
        the request, or raise ``identity`` so that fewer pairs link.
    """
    _check(sequences, q, identity)
    if not (isinstance(test_fraction, int | float) and 0.0 < test_fraction < 1.0):
        raise DataError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    n = sequences.shape[0]
    if graph is None:
        graph = identity_graph(sequences, q, identity, block=block)
    elif graph.groups.shape != (n,) or graph.identity != float(identity):
        raise DataError(
            f"graph= was computed for {graph.groups.shape[0]} sequences at identity {graph.identity:g}, "
            f"not these {n} at {identity:g}"
        )
    labels = graph.groups.numpy()
    n_groups = graph.n_groups
    sizes = np.bincount(labels, minlength=n_groups)
    generator = resolve_generator(generator)
    order = torch.randperm(n_groups, generator=generator).numpy()
    wanted = test_fraction * n
    chosen, taken = [], 0
    for group in order:
        if taken >= wanted:
            break
        if taken + sizes[group] > 2 * wanted:
            continue
        chosen.append(group)
        taken += int(sizes[group])
    if taken == 0 or taken == n:
        raise DataError(
            f"cannot split {n} sequences into test and training without close homologues on both sides: "
            f"at identity {identity:g} they form {n_groups} group(s), the largest of {int(sizes.max())}; "
            "ask for another test fraction, or raise the identity so that fewer pairs link"
        )
    in_test = np.isin(labels, np.asarray(chosen))
    return HomologySplit(
        train=torch.from_numpy(np.flatnonzero(~in_test)),
        test=torch.from_numpy(np.flatnonzero(in_test)),
        identity=float(identity),
        n_groups=int(n_groups),
        largest_group=int(sizes.max()),
    )

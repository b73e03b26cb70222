"""An aligned-FASTA file as a dataset: one-hot splits, sequence weights, homology-aware held-out sets.

``bl.data.load("family.fasta")`` (and ``--data family.fasta`` on the command line) returns a
:class:`SequenceDataset` (docs/data.md, "Aligned sequences"). It *is* a :class:`Dataset`, so
everything that reads ``train`` / ``valid`` / ``test`` keeps working: each split is the
one-hot encoding of its sequences, shape ``(n, L·q)``, float32 0/1 with exactly one 1 per site
(the visible layer of a :class:`~boltzlab.models.potts_rbm.PottsRBM`). On top of that it holds
the alphabet, each split's sequence weights and where its rows came from in the file, and
:meth:`SequenceDataset.alignment` gives a split back as an
:class:`~boltzlab.data.sequences.Alignment`.

**Weights** (Morcos et al. 2011, PNAS 108:E1293): ``1 / (sequences within identity θ, itself
included)``, counted *within each split*, θ = 0.8 by default; their sum is the split's effective
number of sequences. **Held-out splits**: by default 10% of the sequences go to a test split
chosen by :func:`~boltzlab.data.sequence_weights.homology_split` at the same θ, so no test
sequence is within θ of a training one; ``split="random"`` draws a random permutation instead
(as :func:`~boltzlab.data.splits.carve_splits` does for binary files). A homology split keeps
whole groups of linked sequences on one side, so every neighbour of a sequence lies in its own
split and the weights counted on the whole file are each split's own: one pass of the ``N × N``
comparison (:func:`~boltzlab.data.sequence_weights.identity_graph`) gives the weights and the
split together. The split's randomness comes from ``split_seed`` alone, so ``boltzlab train`` and
``boltzlab evaluate`` with the same file and options hold out the same sequences.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from boltzlab.data.dataset import Dataset
from boltzlab.data.sequence_weights import (
    DEFAULT_IDENTITY,
    IdentityGraph,
    effective_number,
    homology_split,
    identity_graph,
)
from boltzlab.data.sequences import Alignment, Alphabet, get_alphabet, read_fasta
from boltzlab.data.splits import DEFAULT_SPLIT_SEED
from boltzlab.errors import DataError, ValidationError

__all__ = [
    "DEFAULT_SEQUENCE_TEST_FRACTION",
    "SEQUENCE_SPLITS",
    "SequenceDataset",
    "load_sequences",
]

#: Share of the sequences held out as the test split when neither fraction is given.
DEFAULT_SEQUENCE_TEST_FRACTION = 0.1
#: How held-out splits are drawn: whole groups of close homologues, or a random permutation.
SEQUENCE_SPLITS = ("homology", "random")
_SPLITS = ("train", "valid", "test")


@dataclass(frozen=True, slots=True, repr=False)  # Dataset's repr: shapes, not tensors
class SequenceDataset(Dataset):
    """A :class:`Dataset` of aligned sequences (module docstring).

    Attributes
    ----------
    train, valid, test : Tensor, shape (n, L·q), float32
        One-hot sequences: site ``i``'s state ``a`` at column ``i·q + a``.
    alphabet : Alphabet
        The ``q`` symbols.
    train_weights, valid_weights, test_weights : Tensor, shape (n,), float64, or None
        Per-sequence weights of each split (``None``: unweighted).
    train_rows, valid_rows, test_rows : Tensor, shape (n,), int64, or None
        Where each split's sequences are in the file (0-based record numbers, sorted).
    identity : float
        θ of the weights and of a homology split.
    split : str
        ``"homology"``, ``"random"`` or ``"none"``: how the held-out splits were drawn.
    split_seed : int
    """

    alphabet: Alphabet | None = None
    train_weights: Tensor | None = None
    valid_weights: Tensor | None = None
    test_weights: Tensor | None = None
    train_rows: Tensor | None = None
    valid_rows: Tensor | None = None
    test_rows: Tensor | None = None
    identity: float = DEFAULT_IDENTITY
    split: str = "none"
    split_seed: int = DEFAULT_SPLIT_SEED

    def __post_init__(self) -> None:
        Dataset.__post_init__(self)  # (zero-argument super() fails in a slotted dataclass)
        if not isinstance(self.alphabet, Alphabet):
            raise DataError(f"dataset {self.name!r}: a SequenceDataset needs its alphabet")
        q = self.alphabet.q
        if self.n_visible % q:
            raise DataError(
                f"dataset {self.name!r}: {self.n_visible} columns are not whole sites of {q} states"
            )
        for split in _SPLITS:
            data = getattr(self, split)
            if data is None:
                continue
            per_site = data.view(data.shape[0], -1, q).sum(2)
            if not bool((per_site == 1).all()):
                raise DataError(f"dataset {self.name!r}: {split} is not one-hot (one 1 per site of {q})")
            for kind in ("weights", "rows"):
                value = getattr(self, f"{split}_{kind}")
                if value is not None and tuple(value.shape) != (data.shape[0],):
                    raise DataError(
                        f"dataset {self.name!r}: {split}_{kind} has shape {tuple(value.shape)}, "
                        f"expected ({data.shape[0]},)"
                    )

    @property
    def n_sites(self) -> int:
        """``L``, the aligned columns."""
        return self.n_visible // self.n_states

    @property
    def n_states(self) -> int:
        """``q``, the alphabet's size."""
        assert self.alphabet is not None  # checked in __post_init__
        return self.alphabet.q

    @property
    def weighted(self) -> bool:
        return self.train_weights is not None

    def weights(self, split: str = "train") -> Tensor | None:
        """The sequence weights of ``split`` (``"train"``, ``"valid"``, ``"test"``), or ``None``."""
        _check_split_name(split)
        return getattr(self, f"{split}_weights")

    def effective_number(self, split: str = "train") -> float:
        """``Σ weights`` of ``split`` (its size when unweighted; NaN when the split is absent)."""
        data = getattr(self, _check_split_name(split))
        if data is None:
            return math.nan
        weights = self.weights(split)
        return float(data.shape[0]) if weights is None else effective_number(weights)

    def split_sizes(self) -> list[str]:
        """``"15,401 training (N_eff 2,170.4)"`` and the like, one per split present."""
        sizes = []
        for split, word in (("train", "training"), ("valid", "validation"), ("test", "test")):
            data = getattr(self, split)
            if data is None:
                continue
            size = f"{data.shape[0]:,} {word}"
            if self.weighted:
                size += f" (N_eff {self.effective_number(split):,.1f})"
            sizes.append(size)
        return sizes

    def alignment(self, split: str = "train") -> Alignment:
        """``split`` as symbol indices ``(n, L)`` (names ``record K``: its place in the file)."""
        data = getattr(self, _check_split_name(split))
        if data is None:
            raise DataError(f"dataset {self.name!r} has no {split} split")
        indices = data.view(data.shape[0], self.n_sites, self.n_states).argmax(2)
        rows = getattr(self, f"{split}_rows")
        numbers = range(data.shape[0]) if rows is None else rows.tolist()
        assert self.alphabet is not None
        return Alignment(
            sequences=indices,
            names=tuple(f"record {number + 1}" for number in numbers),
            alphabet=self.alphabet,
            source=self.source,
        )


def _check_split_name(split: str) -> str:
    if split not in _SPLITS:
        raise ValidationError(f"split must be one of {', '.join(_SPLITS)}, got {split!r}")
    return split


def _fraction(value: float | None, name: str) -> float:
    value = 0.0 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValidationError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


def _random_rows(n: int, fractions: dict[str, float], split_seed: int) -> dict[str, Tensor]:
    """Rows of each split from one permutation drawn from ``split_seed`` (sorted)."""
    counts = {
        split: max(1, round(fraction * n)) if fraction > 0 else 0 for split, fraction in fractions.items()
    }
    if counts["test"] + counts["valid"] >= n:
        raise DataError(
            f"{n} sequences are too few to hold out {counts['test']} test and {counts['valid']} "
            "validation sequences and keep any for training"
        )
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(split_seed)))
    test_end = counts["test"]
    valid_end = test_end + counts["valid"]
    return {
        "test": order[:test_end].sort().values,
        "valid": order[test_end:valid_end].sort().values,
        "train": order[valid_end:].sort().values,
    }


def _homology_rows(
    sequences: Tensor, q: int, graph: IdentityGraph, fractions: dict[str, float], split_seed: int
) -> dict[str, Tensor]:
    """Rows of each split, whole groups at a time: test from all, then validation from the rest."""
    generator = torch.Generator().manual_seed(int(split_seed))
    n = sequences.shape[0]
    empty = torch.zeros(0, dtype=torch.int64)
    rows = {"train": torch.arange(n), "valid": empty, "test": empty}
    for split in ("test", "valid"):
        if fractions[split] == 0:
            continue
        kept = rows["train"]
        # The fraction of the whole file, as a share of what is left.
        share = fractions[split] * n / kept.numel()
        if share >= 1.0:
            raise DataError(f"too few sequences left to hold out a {split} split of {fractions[split]:g}")
        part = homology_split(
            sequences[kept], q, share, identity=graph.identity, generator=generator, graph=graph.subset(kept)
        )
        rows[split] = kept[part.test]
        rows["train"] = kept[part.train]
    return rows


def load_sequences(
    path: str | Path,
    *,
    alphabet: str | Alphabet = "protein",
    identity: float = DEFAULT_IDENTITY,
    weighted: bool = True,
    split: Literal["homology", "random"] = "homology",
    test_fraction: float | None = None,
    validation_fraction: float | None = None,
    split_seed: int = DEFAULT_SPLIT_SEED,
    unknown: Literal["refuse", "gap"] = "refuse",
) -> SequenceDataset:
    """Read an aligned FASTA file as a :class:`SequenceDataset`, weighted and split.

    Parameters
    ----------
    path : str or Path
        Aligned FASTA (:func:`~boltzlab.data.sequences.read_fasta`).
    alphabet : str or Alphabet, default "protein"
        ``"protein"``, ``"rna"``, ``"dna"`` or ``"custom:SYMBOLS"``.
    identity : float in (0, 1], default 0.8
        θ of the sequence weights and of the homology split.
    weighted : bool, default True
        Compute sequence weights (False: every sequence counts 1).
    split : {"homology", "random"}, default "homology"
        How the held-out splits are drawn (module docstring).
    test_fraction, validation_fraction : float in [0, 1), optional
        Shares of the sequences held out. When neither is given the test split takes
        :data:`DEFAULT_SEQUENCE_TEST_FRACTION` (0.1); pass ``test_fraction=0`` to hold out none.
        A homology split lands near the share asked for (whole groups move).
    split_seed : int, default 0
        Seed of the split (not of training), so every command holds out the same sequences.
    unknown : {"refuse", "gap"}, default "refuse"
        A symbol outside the alphabet: refused with its line and column, or read as the gap.

    Examples
    --------
    >>> from pathlib import Path
    >>> import tempfile, boltzlab as bl
    >>> path = Path(tempfile.mkdtemp()) / "tiny.fasta"
    >>> _ = path.write_text(">a\\nACGU\\n>b\\nACGA\\n>c\\nUUCA\\n>d\\nGGCA\\n")
    >>> data = bl.data.load(path, alphabet="rna", test_fraction=0.25)
    >>> data.train.shape, data.alignment("test").as_strings()
    (torch.Size([3, 20]), ['ACGU'])
    """
    if split not in SEQUENCE_SPLITS:
        raise ValidationError(f"split must be one of {', '.join(SEQUENCE_SPLITS)}, got {split!r}")
    if not isinstance(identity, int | float) or isinstance(identity, bool) or not 0.0 < identity <= 1.0:
        raise ValidationError(f"identity must be a fraction in (0, 1], got {identity!r}")
    fractions = {
        "test": _fraction(test_fraction, "test_fraction"),
        "valid": _fraction(validation_fraction, "validation_fraction"),
    }
    if test_fraction is None and validation_fraction is None:
        fractions["test"] = DEFAULT_SEQUENCE_TEST_FRACTION
    if sum(fractions.values()) >= 1.0:
        raise ValidationError(
            f"test_fraction + validation_fraction must be below 1 to leave training sequences, got "
            f"{fractions['test']:g} + {fractions['valid']:g}"
        )
    chosen = get_alphabet(alphabet)
    alignment = read_fasta(path, chosen, unknown=unknown)
    sequences, q = alignment.sequences, chosen.q
    held_out = any(fractions.values())
    graph = None
    if weighted or (held_out and split == "homology"):
        graph = identity_graph(sequences, q, identity)
    if not held_out:
        rows = {"train": torch.arange(sequences.shape[0])}
    elif split == "homology":
        assert graph is not None
        rows = _homology_rows(sequences, q, graph, fractions, split_seed)
    else:
        rows = _random_rows(sequences.shape[0], fractions, split_seed)
    fields: dict[str, Tensor | None] = {}
    for name in _SPLITS:
        chosen_rows = rows.get(name)
        if chosen_rows is None or chosen_rows.numel() == 0:
            fields[name] = fields[f"{name}_weights"] = fields[f"{name}_rows"] = None
            continue
        part = sequences[chosen_rows]
        fields[name] = torch.nn.functional.one_hot(part, q).reshape(part.shape[0], -1).to(torch.float32)
        fields[f"{name}_rows"] = chosen_rows
        if not weighted:
            fields[f"{name}_weights"] = None
        elif split == "homology" or not held_out:
            assert graph is not None  # whole groups per split: the file's counts are the split's
            fields[f"{name}_weights"] = 1.0 / graph.neighbours[chosen_rows].to(torch.float64)
        else:  # a random split cuts groups: count each split's neighbours within it
            fields[f"{name}_weights"] = 1.0 / identity_graph(part, q, identity).neighbours.to(torch.float64)
    dataset = SequenceDataset(
        name=Path(path).name.removesuffix(".gz"),
        source=str(path),
        alphabet=chosen,
        identity=float(identity),
        split=split if held_out else "none",
        split_seed=int(split_seed),
        **fields,  # type: ignore[arg-type]
    )
    return dataclasses.replace(dataset, description=describe(dataset))


def describe(dataset: SequenceDataset) -> str:
    """One line: the file, the alphabet, the sizes, the weights and the held-out splits."""
    assert dataset.alphabet is not None
    parts = [
        f"read from {dataset.source}: {dataset.alphabet.name} alphabet ({dataset.alphabet.symbols}), "
        f"{dataset.n_sites} columns"
    ]
    parts.append(", ".join(dataset.split_sizes()) + " sequences")
    parts.append(
        f"weights 1/(neighbours within identity {dataset.identity:g})" if dataset.weighted else "unweighted"
    )
    if dataset.split == "homology":
        parts.append(
            f"held out by homology: no held-out sequence within identity {dataset.identity:g} of a "
            f"training one (split seed {dataset.split_seed})"
        )
    elif dataset.split == "random":
        parts.append(f"held out at random (split seed {dataset.split_seed})")
    return "; ".join(parts)

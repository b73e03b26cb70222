"""What the commands do with aligned sequences: weights into training, records, weighted scores.

``--data family.fasta`` gives a :class:`~boltzlab.data.sequence_dataset.SequenceDataset`
(docs/data.md, "Aligned sequences"). The commands use it through these functions:

* :func:`weighted_training_data` is the **one place** where sequence weights reach training:
  :func:`boltzlab.train`'s ``sample_weights=`` (minibatch rows drawn in proportion to weight,
  and the profile base fitted to the weighted frequencies; docs/training.md).
* :func:`sequence_record` is what ``train`` writes into the model file about how the sequences
  were read and split, and :func:`recorded_reading` reads it back, so that ``evaluate`` and
  ``logz`` hold out the sequences ``train`` held out without repeating the flags.
* :func:`weighted_mean_log_f` is the weighted mean ``Σ w log f(v) / Σ w`` behind a weighted
  log-likelihood (each held-out sequence counted with its weight).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from boltzlab.data.sequence_dataset import DEFAULT_SEQUENCE_TEST_FRACTION, SequenceDataset
from boltzlab.errors import ValidationError
from boltzlab.estimators.likelihood import log_unnormalized

__all__ = [
    "TrainingRows",
    "check_sequences_fit",
    "describe_sequences",
    "recorded_reading",
    "sequence_record",
    "weighted_mean_log_f",
    "weighted_training_data",
]

#: Where the reading options live in a model file's metadata (under ``data``).
_RECORD_KEY = "sequences"
# The record's keys that load_data takes back as reading options.
_READING_KEYS = ("identity", "weighted", "split", "test_fraction", "validation_fraction", "unknown")


@dataclass(frozen=True)
class TrainingRows:
    """What :func:`boltzlab.train` receives for a sequence dataset.

    Attributes
    ----------
    data : Tensor, shape (n, L·q)
        One-hot training rows.
    keywords : dict
        ``{"sample_weights": weights}`` for a weighted alignment, else empty.
    note : str
        How the weights reached training, for the console.
    """

    data: Tensor
    keywords: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def weighted_training_data(dataset: SequenceDataset) -> TrainingRows:
    """The training rows and weights of ``dataset`` as :func:`boltzlab.train` takes them (module docstring)."""
    weights = dataset.train_weights
    if weights is None:
        return TrainingRows(dataset.train, note="unweighted: every sequence counts 1")
    return TrainingRows(
        dataset.train, {"sample_weights": weights}, note="sequence weights passed to training"
    )


def effective_fractions(options: dict[str, Any]) -> tuple[float, float]:
    """``(test, validation)`` fractions a FASTA file is split by, defaults filled in."""
    test, validation = options.get("test_fraction"), options.get("validation_fraction")
    if test is None and validation is None:
        return DEFAULT_SEQUENCE_TEST_FRACTION, 0.0
    return float(test or 0.0), float(validation or 0.0)


def sequence_record(dataset: SequenceDataset, options: dict[str, Any]) -> dict[str, Any]:
    """What a model file records of its sequences: how they were read, weighted and split."""
    test, validation = effective_fractions(options)
    record: dict[str, Any] = {
        "identity": dataset.identity,
        "weighted": dataset.weighted,
        "split": dataset.split if dataset.split != "none" else options.get("split") or "homology",
        "split_seed": dataset.split_seed,
        "test_fraction": test,
        "validation_fraction": validation,
        "unknown": options.get("unknown") or "refuse",
        "n_sites": dataset.n_sites,
    }
    for split in ("train", "valid", "test"):
        data = getattr(dataset, split)
        if data is not None:
            record[f"n_{split}"] = int(data.shape[0])
            record[f"effective_{split}"] = round(dataset.effective_number(split), 3)
    return {_RECORD_KEY: record}


def recorded_reading(model: nn.Module) -> dict[str, Any]:
    """The reading options a Potts model's file recorded (for ``load_data(recorded=...)``): its
    alphabet, and the identity, weighting and split of its training run; empty for others."""
    alphabet = getattr(model, "alphabet", None)
    if alphabet is None:
        return {}
    reading: dict[str, Any] = {"alphabet": alphabet}
    data = getattr(model, "metadata", {}).get("data")
    record = data.get(_RECORD_KEY) if isinstance(data, dict) else None
    if isinstance(record, dict):
        reading.update({key: record[key] for key in _READING_KEYS if key in record})
    return reading


def check_sequences_fit(model: nn.Module, dataset: Any, name: str) -> None:
    """Refuse sequences for a binary model, binary data for a Potts model, and an alphabet that is
    not the model's, each in one line naming the fix."""
    alphabet = getattr(model, "alphabet", None)
    potts = getattr(model, "n_states", None) is not None
    if isinstance(dataset, SequenceDataset):
        if not potts:
            raise ValidationError(
                f"--data {name} holds aligned sequences, but the model is a {type(model).__name__} of binary "
                "units; sequences need a Potts RBM (boltzlab train --data FILE.fasta --hidden N)"
            )
        if dataset.n_states != model.n_states or dataset.n_sites != model.n_sites:
            raise ValidationError(
                f"--data {name} has {dataset.n_sites} columns of {dataset.n_states} symbols; the model has "
                f"{model.n_sites} sites of {model.n_states} states"
            )
        if (
            alphabet is not None
            and dataset.alphabet is not None
            and dataset.alphabet.symbols != alphabet.symbols
        ):
            raise ValidationError(
                f"--alphabet {dataset.alphabet.name} ({dataset.alphabet.symbols}) is not the model's "
                f"{alphabet.name} alphabet ({alphabet.symbols}); drop --alphabet to use the model's"
            )
    elif potts:
        raise ValidationError(
            f"the model is a Potts RBM of {model.n_sites} sites × {model.n_states} states; --data {name} "
            "is not aligned FASTA (.fasta, .fa, .faa, .afa, .a2m, .aln)"
        )


def weighted_mean_log_f(model: nn.Module, examples: Tensor | None, weights: Tensor | None) -> float:
    """``Σ w log f(v) / Σ w`` over ``examples`` (the plain mean when ``weights`` is None); NaN for none."""
    if examples is None or examples.shape[0] == 0:
        return float("nan")
    values = log_unnormalized(model, examples)
    if weights is None:
        return float(values.mean())
    weights = weights.to(device=values.device, dtype=torch.float64)
    return float((weights @ values) / weights.sum())


def describe_sequences(dataset: SequenceDataset) -> str:
    """One console line on the sequences: sizes, N_eff per split and how they were held out."""
    parts = dataset.split_sizes()
    weights = (
        f"weights 1/(neighbours within identity {dataset.identity:g})"
        if dataset.weighted
        else "no sequence weights"
    )
    held = {
        "homology": f"held out by homology (no held-out sequence within identity {dataset.identity:g} of a "
        "training one)",
        "random": "held out at random",
        "none": "none held out",
    }[dataset.split]
    assert dataset.alphabet is not None
    return (
        f"sequences: {dataset.n_sites} columns, {dataset.alphabet.name} alphabet (q = {dataset.n_states}); "
        f"{', '.join(parts)}; {weights}; {held}"
    )

"""Greedy layer-wise pretraining of a DBM with the RBM trainer.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §3.1) initialise a DBM from
a stack of RBMs trained one layer at a time, each on the hidden activities of the one below
(Hinton, Osindero & Teh 2006). Their recipe also doubles the bottom RBM's visible input and the
top RBM's hidden input ("tied copies") so that the interior layers, which in the DBM hear both
neighbours, are not counted twice. Those details are outside the papers this project follows
(docs/open-questions.md item 17), so this module implements a documented simple version without the
doubling:

1. RBM ``l`` (``n_{l−1} × n_l``) is trained by :func:`boltzlab.train` (CD-1 by default) on
   binary features: the data for ``l = 1``, else one draw of ``h ~ p(h | x)`` of RBM ``l − 1``
   for each feature vector ``x`` of its own training set (a fresh draw per layer, from the
   run's generator).
2. The DBM takes ``W^l`` = RBM ``l``'s weights; ``b⁰`` = RBM 1's visible bias; ``b^L`` = RBM
   ``L``'s hidden bias; an interior layer's bias is the mean of the hidden bias of the RBM
   below and the visible bias of the RBM above (``interior_bias="average"``), or either one
   (``"below"`` / ``"above"``).
3. The DBM's base-rate base is fitted to the data (for AIS).

The result is a starting point for SAP/CAST learning, not a good DBM on its own: without the
doubling, the mean-field posterior of an interior layer receives input from both neighbours,
each trained to explain it alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.models.dbm import DBM, check_layer_sizes
from boltzlab.models.rbm import RBM
from boltzlab.rng import resolve_generator, sample_bernoulli, spawn
from boltzlab.training.state import TrainResult
from boltzlab.training.trainer import train
from boltzlab.validation import as_binary_tensor, check_positive_int, require

__all__ = ["PretrainResult", "pretrain_dbm"]

_INTERIOR_BIASES = ("average", "below", "above")


@dataclass(frozen=True)
class PretrainResult:
    """A DBM built from a greedily trained stack of RBMs.

    Attributes
    ----------
    dbm : DBM
        Layer sizes as asked; weights and biases from the RBMs (module docstring).
    rbms : tuple of RBM
        The trained RBMs, bottom first; ``rbms[l]`` has shape ``(n_l, n_{l+1})``.
    histories : tuple of TrainResult
        Each RBM's training result.
    """

    dbm: DBM
    rbms: tuple[RBM, ...]
    histories: tuple[TrainResult, ...]


def pretrain_dbm(
    layer_sizes: Sequence[int],
    data: Any,
    *,
    n_updates: int | Sequence[int] = 1000,
    algorithm: str = "cd",
    learning_rate: float = 0.05,
    momentum: float = 0.5,
    batch_size: int = 100,
    interior_bias: str = "average",
    generator: torch.Generator | int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    **train_options: Any,
) -> PretrainResult:
    """Train RBMs bottom-up and stack them into a DBM (see the module docstring).

    Parameters
    ----------
    layer_sizes : sequence of int
        ``[n_visible, n_hidden_1, …, n_hidden_L]``, L ≥ 2.
    data : Tensor, shape (n_examples, n_visible), values 0/1
    n_updates : int or sequence of L ints, default 1000
        Parameter updates of each RBM (one value for all, or one per layer).
    algorithm : str, default "cd"
        Any :func:`boltzlab.train` algorithm (``"cd"``, ``"pcd"``, ...).
    learning_rate, momentum, batch_size
        As in :func:`boltzlab.train`, for every RBM.
    interior_bias : {"average", "below", "above"}, default "average"
    generator : torch.Generator or int, optional
        Initial weights, training and feature draws all come from it.
    dtype, device
        Of the RBMs and the DBM.
    **train_options
        Further :func:`boltzlab.train` options (``k``, ``n_chains``, ``weight_decay``, ...).

    Returns
    -------
    PretrainResult

    Examples
    --------
    >>> import torch, boltzlab as bl
    >>> from boltzlab.training.pretraining import pretrain_dbm
    >>> data = bl.data.load("bars-and-stripes", size=3).train
    >>> result = pretrain_dbm([9, 6, 4], data, n_updates=50, batch_size=7, generator=0)
    >>> result.dbm.layer_sizes, [rbm.layer_sizes for rbm in result.rbms]
    ((9, 6, 4), [(9, 6), (6, 4)])
    """
    sizes = check_layer_sizes(layer_sizes)
    n_layers = len(sizes) - 1
    if isinstance(n_updates, (list, tuple)):
        require(
            len(n_updates) == n_layers,
            f"n_updates must be one int or {n_layers} ints (one per RBM), got {len(n_updates)}",
        )
        counts = [check_positive_int(count, f"n_updates[{index}]") for index, count in enumerate(n_updates)]
    else:
        counts = [check_positive_int(n_updates, "n_updates")] * n_layers
    require(
        interior_bias in _INTERIOR_BIASES,
        f"interior_bias must be one of {', '.join(map(repr, _INTERIOR_BIASES))}, got {interior_bias!r}",
    )
    for name in ("generator", "n_epochs", "fit_base_rate"):
        if name in train_options:
            raise ValidationError(f"{name} is set by pretrain_dbm; leave it out of the training options")
    device = torch.device(device)
    features = as_binary_tensor(data, "data", n_units=sizes[0], dtype=dtype, device=device)
    generator = resolve_generator(generator, device)

    rbms: list[RBM] = []
    histories: list[TrainResult] = []
    for index in range(n_layers):
        model_generator, train_generator, feature_generator = spawn(generator, 3)
        rbm = RBM(sizes[index], sizes[index + 1], generator=model_generator, dtype=dtype, device=device)
        history = train(
            rbm,
            features,
            algorithm=algorithm,
            n_updates=counts[index],
            learning_rate=learning_rate,
            momentum=momentum,
            batch_size=min(batch_size, features.shape[0]),
            generator=train_generator,
            **train_options,
        )
        rbms.append(rbm)
        histories.append(history)
        if index + 1 < n_layers:
            with torch.no_grad():
                probability = torch.sigmoid(torch.addmm(rbm.hidden_bias, features, rbm.weights))
                features = sample_bernoulli(probability, generator=feature_generator)

    dbm = DBM(
        weights=[rbm.weights.detach() for rbm in rbms],
        biases=_stacked_biases(rbms, interior_bias),
        dtype=dtype,
        device=device,
    )
    dbm.set_base_rate(as_binary_tensor(data, "data", n_units=sizes[0], dtype=dtype, device=device))
    return PretrainResult(dbm=dbm, rbms=tuple(rbms), histories=tuple(histories))


def _stacked_biases(rbms: list[RBM], interior_bias: str) -> list[Tensor]:
    """``b⁰`` from the bottom RBM, ``b^L`` from the top one, interior ones as chosen."""
    biases = [rbms[0].visible_bias.detach()]
    for below, above in itertools.pairwise(rbms):
        if interior_bias == "below":
            biases.append(below.hidden_bias.detach())
        elif interior_bias == "above":
            biases.append(above.visible_bias.detach())
        else:
            biases.append(0.5 * (below.hidden_bias.detach() + above.visible_bias.detach()))
    biases.append(rbms[-1].hidden_bias.detach())
    return biases

"""The state of the ``"rts"`` tracking negative phase and its checkpoint form.

The phase itself is :class:`~boltzlab.training.tracking.RTSTracking`; its module docstring
says what each field means for the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError

__all__ = ["RTSTrackingState", "layers_from_tensors"]


@dataclass(frozen=True, slots=True)
class RTSTrackingState:
    """The state of the ``"rts"`` negative phase.

    Attributes
    ----------
    chains : Chains
        ``n_chains`` tempered chains; ``chains.beta`` is the β of each chain's level.
    levels : Tensor, shape (n_chains,), int64
        Level of each chain on the ladder (``K − 1`` is β = 1).
    log_z_hat : Tensor, shape (K,), float64
        The tracked ``log Ẑ_k`` (``log Ẑ_0 = 0``, the normalised base); ``log_z_hat[-1]``
        estimates ``log Z`` of the model.
    influence : Tensor, shape (n_chains, K), float64
        Each chain's moving-average influence on ``log_z_hat`` (module docstring); the
        variance of ``log_z_hat`` is their spread over chains divided by ``n_chains``.
    log_c : Tensor, shape (K,), float64
        Normalised ``log ĉ`` of the last update (or initial iteration).
    log_prior : Tensor, shape (K,), float64
        Normalised ``log r``.
    target : Chains
        The β = 1 states of the latest update that had any (a variable number), ``beta`` all 1:
        the model term's samples.
    n_updates : int
        Updates made since ``init``.
    n_reused : int
        Updates that had no chain at β = 1 and reused older β = 1 states.
    initial_stop_statistics : Tensor, shape (n_initial_iterations_run,), float64
        ``max_k |ĉ_k/r_k − 1|`` after each initial iteration.
    """

    chains: Chains
    levels: Tensor
    log_z_hat: Tensor
    influence: Tensor
    log_c: Tensor
    log_prior: Tensor
    target: Chains
    n_updates: int
    n_reused: int
    initial_stop_statistics: Tensor


def tracking_state_tensors(state: RTSTrackingState) -> dict[str, Tensor]:
    """The tensors a checkpoint stores for an ``"rts"`` state (copies, contiguous).

    Layers are stored as ``chains.layer{i}`` and ``target.layer{i}``; ``counters`` holds
    ``[n_updates, n_reused]``. :func:`tracking_state_from_tensors` reverses it.
    """
    tensors = {f"chains.layer{i}": layer.contiguous().clone() for i, layer in enumerate(state.chains.layers)}
    tensors.update(
        {f"target.layer{i}": layer.contiguous().clone() for i, layer in enumerate(state.target.layers)}
    )
    tensors["levels"] = state.levels.clone()
    tensors["log_z_hat"] = state.log_z_hat.clone()
    tensors["influence"] = state.influence.clone()
    tensors["log_c"] = state.log_c.clone()
    tensors["counters"] = torch.tensor([state.n_updates, state.n_reused], dtype=torch.int64)
    tensors["initial_stop_statistics"] = state.initial_stop_statistics.clone()
    return tensors


def tracking_state_from_tensors(
    model: Any, tensors: dict[str, Tensor], *, n_chains: int, betas: Tensor, log_prior: Tensor
) -> RTSTrackingState:
    """An ``"rts"`` state from a checkpoint's tensors, checked against the run that resumes it.

    Parameters
    ----------
    model : Any
    The model being trained (its ``device``, ``dtype`` and ``layer_sizes``).
    tensors : dict[str, Tensor]
    What :func:`tracking_state_tensors` wrote.
    n_chains : int
    Tempered chains this run asks for.
    betas : Tensor, shape (K,), model dtype
    The ladder's β values; each chain's β is ``betas[level]``.
    log_prior : Tensor, shape (K,), float64
    Normalised ``log r`` of this run (not stored: it follows from the options).

    Raises
    ------
    ValidationError
    A missing tensor, or chains, levels or vectors that do not fit this run.
    """
    required = ("levels", "log_z_hat", "influence", "log_c", "counters", "initial_stop_statistics")
    missing = [name for name in required if name not in tensors]
    if missing:
        raise ValidationError(f"the checkpoint has no {', '.join(missing)}: not an 'rts' phase state")
    device = model.device
    n_levels = len(betas)
    levels = tensors["levels"].to(device=device, dtype=torch.int64)
    layers = layers_from_tensors(tensors, "chains", model)
    target_layers = layers_from_tensors(tensors, "target", model)
    n_stored = layers[0].shape[0]
    if n_stored != n_chains or levels.shape != (n_chains,):
        raise ValidationError(
            f"the checkpoint holds {n_stored} tempered chains, this run asks for {n_chains}"
        )
    if not bool(((levels >= 0) & (levels < n_levels)).all()):
        raise ValidationError(f"the checkpoint's levels do not fit a ladder of {n_levels} levels")
    vectors = {}
    for name in ("log_z_hat", "log_c"):
        vectors[name] = tensors[name].to(device=device, dtype=torch.float64)
        if vectors[name].shape != (n_levels,):
            raise ValidationError(
                f"the checkpoint's {name} has shape {tuple(vectors[name].shape)}, expected ({n_levels},)"
            )
    influence = tensors["influence"].to(device=device, dtype=torch.float64)
    if influence.shape != (n_chains, n_levels):
        raise ValidationError(
            f"the checkpoint's influence has shape {tuple(influence.shape)}, "
            f"expected ({n_chains}, {n_levels})"
        )
    counters = tensors["counters"].reshape(-1)
    target_size = target_layers[0].shape[0]
    return RTSTrackingState(
        chains=Chains(layers=layers, beta=betas[levels]),
        levels=levels,
        log_z_hat=vectors["log_z_hat"],
        influence=influence,
        log_c=vectors["log_c"],
        log_prior=log_prior,
        target=Chains(layers=target_layers, beta=torch.ones(target_size, dtype=model.dtype, device=device)),
        n_updates=int(counters[0]),
        n_reused=int(counters[1]),
        initial_stop_statistics=tensors["initial_stop_statistics"].to(torch.float64),
    )


def layers_from_tensors(tensors: dict[str, Tensor], prefix: str, model: Any) -> tuple[Tensor, ...]:
    """The layers stored as ``{prefix}.layer{i}``, on the model's device and dtype, checked against its sizes."""
    layers = []
    while f"{prefix}.layer{len(layers)}" in tensors:
        layers.append(tensors[f"{prefix}.layer{len(layers)}"].to(device=model.device, dtype=model.dtype))
    if len(layers) != len(model.layer_sizes) or any(
        layer.dim() != 2 or layer.shape[1] != size
        for layer, size in zip(layers, model.layer_sizes, strict=True)
    ):
        raise ValidationError(
            f"the checkpoint's {prefix!r} layers have shapes {[tuple(layer.shape) for layer in layers]}; "
            f"the model's layers have {list(model.layer_sizes)} units"
        )
    return tuple(layers)

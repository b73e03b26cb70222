"""Mode hopping: assign sampled states to the nearest class template and count class changes.

Brügge, Fischer & Igel (2013, §5.3) measure how often a sampler moves between the modes of
an RBM trained on labelled data: every state of a chain is assigned to the nearest mode
("ties in nearest-mode assignment are discarded"), and they report the number of class
changes of one long chain and the number of steps until the first change of chains started
at training examples (docs/algorithms.md §2.2, "Mode hopping").

Templates. :func:`class_templates` returns, per class, the class-conditional mean of the
data thresholded at 1/2 — a binary prototype, so that the nearest template is the one at the
smallest Hamming distance, the natural metric for binary states and the one for which ties
(equal integer distances) are well defined and actually happen. ``threshold=None`` keeps the
class-conditional means themselves; :func:`nearest_template` then uses the squared Euclidean
distance, which for binary templates *is* the Hamming distance, so one function serves both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = ["TIED", "class_templates", "count_mode_changes", "nearest_template", "steps_to_first_change"]

TIED = -1
"""Assignment of a state equidistant from two or more templates (discarded when counting)."""


def _as_tensor(value: Any, name: str) -> Tensor:
    if isinstance(value, Tensor):
        return value.detach()
    try:
        return torch.as_tensor(np.asarray(value))
    except (TypeError, ValueError) as error:
        raise ValidationError(f"{name} could not be read as an array: {error}") from None


def class_templates(data: Any, labels: Any, *, threshold: float | None = 0.5) -> Tensor:
    """One template per class: the class-conditional mean, thresholded by default.

    Parameters
    ----------
    data : Tensor or array, shape (n_examples, n_visible)
        Binary (or real-valued) examples.
    labels : Tensor or array of int, shape (n_examples,)
        Class indices ``0..n_classes − 1``; every class must occur.
    threshold : float or None, default 0.5
        Templates are ``mean > threshold`` as 0/1 (binary prototypes, compared by Hamming
        distance); ``None`` returns the means themselves (compared by Euclidean distance).

    Returns
    -------
    Tensor, shape (n_classes, n_visible), float64
        Row ``k`` is the template of class ``k``.
    """
    data = _as_tensor(data, "data").to(device="cpu", dtype=torch.float64)
    labels = _as_tensor(labels, "labels").to("cpu")
    if data.dim() != 2:
        raise ValidationError(f"data must have shape (n_examples, n_visible), got {tuple(data.shape)}")
    if labels.dim() != 1 or labels.shape[0] != data.shape[0]:
        raise ValidationError(
            f"labels must have shape ({data.shape[0]},) to match data, got {tuple(labels.shape)}"
        )
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValidationError(f"labels must be integer class indices, got dtype {labels.dtype}")
    if labels.numel() == 0 or int(labels.min()) < 0:
        raise ValidationError("labels must be non-empty class indices >= 0")
    labels = labels.to(torch.int64)
    n_classes = int(labels.max()) + 1
    counts = torch.bincount(labels, minlength=n_classes)
    missing = (counts == 0).nonzero().flatten().tolist()
    if missing:
        raise ValidationError(
            f"labels has no example of class(es) {missing}; every class 0..{n_classes - 1} needs one"
        )
    sums = torch.zeros(n_classes, data.shape[1], dtype=torch.float64).index_add_(0, labels, data)
    means = sums / counts[:, None].to(torch.float64)
    if threshold is None:
        return means
    return (means > float(threshold)).to(torch.float64)


def nearest_template(states: Any, templates: Any) -> Tensor:
    """Index of the nearest template of every state; ``TIED`` (−1) where the nearest is not unique.

    Distances are squared Euclidean (Hamming for binary states and binary templates),
    computed exactly in float64 for binary inputs.

    Parameters
    ----------
    states : Tensor or array, shape (..., n_visible)
        E.g. ``(n_chains, n_visible)`` or ``(n_steps, n_chains, n_visible)``.
    templates : Tensor or array, shape (n_templates, n_visible)

    Returns
    -------
    Tensor of int64, shape ``states.shape[:-1]``
    """
    states = _as_tensor(states, "states")
    templates = _as_tensor(templates, "templates").to(device=states.device, dtype=torch.float64)
    if templates.dim() != 2 or templates.shape[0] < 1:
        raise ValidationError(
            f"templates must have shape (n_templates, n_visible), got {tuple(templates.shape)}"
        )
    if states.dim() < 1 or states.shape[-1] != templates.shape[1]:
        raise ValidationError(
            f"states must have shape (..., {templates.shape[1]}) to match templates, got {tuple(states.shape)}"
        )
    flat = states.reshape(-1, states.shape[-1]).to(torch.float64)
    # ‖s − t‖² = ‖s‖² − 2 s·t + ‖t‖²; ‖s‖² is common to all templates of a state, so it is
    # left out. For 0/1 values every term is an integer below 2^53: ties are exact.
    distances = (templates * templates).sum(1)[None, :] - 2.0 * (flat @ templates.T)
    best = distances.min(1, keepdim=True).values
    n_nearest = (distances == best).sum(1)
    index = distances.argmin(1)
    index = torch.where(n_nearest == 1, index, torch.full_like(index, TIED))
    return index.reshape(states.shape[:-1])


def _as_assignments(assignments: Any) -> tuple[Tensor, bool]:
    """Assignments as int64 of shape (n_steps, n_chains), and whether the input was 1-D."""
    tensor = _as_tensor(assignments, "assignments").to("cpu")
    if tensor.is_floating_point() or tensor.dtype == torch.bool:
        raise ValidationError(f"assignments must be integer class indices, got dtype {tensor.dtype}")
    if tensor.dim() not in (1, 2) or tensor.shape[0] == 0:
        raise ValidationError(
            f"assignments must have shape (n_steps,) or (n_steps, n_chains), got {tuple(tensor.shape)}"
        )
    if int(tensor.min()) < TIED:
        raise ValidationError(
            f"assignments must be class indices >= 0 or {TIED} (tied), got {int(tensor.min())}"
        )
    one_dimensional = tensor.dim() == 1
    return (tensor[:, None] if one_dimensional else tensor).to(torch.int64), one_dimensional


def _last_untied(assignments: Tensor) -> Tensor:
    """For every step and chain, the most recent non-tied class up to that step (−1 if none)."""
    n_steps = assignments.shape[0]
    steps = torch.arange(n_steps)[:, None].expand_as(assignments)
    # Index of the latest non-tied step so far, by a running maximum over step indices.
    marked = torch.where(assignments != TIED, steps, torch.full_like(steps, -1))
    latest = torch.cummax(marked, dim=0).values
    gathered = torch.gather(assignments, 0, latest.clamp_min(0))
    return torch.where(latest >= 0, gathered, torch.full_like(gathered, TIED))


def count_mode_changes(assignments: Any) -> Tensor:
    """Number of class changes of every chain, ignoring tied steps.

    A change is counted at a step whose (non-tied) class differs from the last non-tied
    class before it; tied steps (``TIED``) neither count nor reset the reference, so
    ``3, −1, 3`` has no change and ``3, −1, 5`` has one.

    Parameters
    ----------
    assignments : Tensor or array of int, shape (n_steps,) or (n_steps, n_chains)
        Output of :func:`nearest_template` over time.

    Returns
    -------
    Tensor of int64, shape () for a single series or (n_chains,)
    """
    tensor, one_dimensional = _as_assignments(assignments)
    previous = _last_untied(tensor)[:-1]
    current = tensor[1:]
    changes = ((current != TIED) & (previous != TIED) & (current != previous)).sum(0)
    return changes[0] if one_dimensional else changes


def steps_to_first_change(assignments: Any, *, initial: Any = None) -> Tensor:
    """Step index of every chain's first class change; −1 for chains that never change.

    Parameters
    ----------
    assignments : Tensor or array of int, shape (n_steps,) or (n_steps, n_chains)
        Row ``t`` is the assignment after ``t`` steps (row 0: the starting state), so the
        returned index is the number of steps taken until the first change.
    initial : Tensor or array of int, shape () or (n_chains,), optional
        The class to leave (e.g. the labels of the training examples the chains started
        from). Default: each chain's first non-tied assignment.

    Returns
    -------
    Tensor of int64, shape () for a single series or (n_chains,)
        The first ``t`` with a non-tied assignment different from the initial class, or
        −1 when there is none (a censored chain: it did not change within ``n_steps − 1``).
    """
    tensor, one_dimensional = _as_assignments(assignments)
    n_chains = tensor.shape[1]
    if initial is None:
        # torch.argmax returns the first maximal index: the first non-tied step (0, with a
        # TIED start that never counts a change, for a chain that is tied throughout).
        first_untied = (tensor != TIED).to(torch.int64).argmax(0)
        start = tensor[first_untied, torch.arange(n_chains)]
    else:
        start = _as_tensor(initial, "initial").to(torch.int64).reshape(-1)
        if start.numel() != n_chains:
            raise ValidationError(
                f"initial must hold {n_chains} class(es), one per chain, got {start.numel()}"
            )
    changed = (tensor != TIED) & (tensor != start[None, :]) & (start[None, :] != TIED)
    first = torch.where(changed.any(0), changed.to(torch.int64).argmax(0), torch.full((n_chains,), -1))
    return first[0] if one_dimensional else first

"""log Z for ``BernoulliRBM.score_samples``: which method, and when a kept value is still valid.

``score_samples`` is ``log p(v) = −F(v) − log Z`` (docs/algorithms.md §1.1). ``log Z`` comes from
:func:`boltzlab.estimate_log_z`: by enumeration of the smaller layer when it is small enough,
else by anchored AIS (docs/algorithms.md §4.7) anchored on training rows, which also start the
verdict's witness chains (docs/trust.md). A value is kept with a fingerprint of every
parameter and the base, so any change — a fit, a write into ``components_`` — is noticed.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from boltzlab import distributed
from boltzlab.estimators import LogZEstimate, estimate_log_z
from boltzlab.models import RBM
from boltzlab.rng import make_generator

__all__ = ["MAX_EXACT_UNITS"]

#: ``log_z_method="auto"`` enumerates the smaller layer up to this many units (2^20 states,
#: a second or two); above it, anchored AIS estimates log Z.
MAX_EXACT_UNITS = 20
#: Training rows kept (binary, as drawn) to anchor and check an estimate; anchored AIS starts
#: that many chains by default.
MAX_ANCHOR_ROWS = 1000


def parameter_fingerprint(model: RBM) -> str:
    """A digest of the parameters and the base's logits: equal digests, equal ``log Z``."""
    digest = hashlib.blake2b(digest_size=16)
    for tensor in (*model.parameters(), model.base_logits):
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


def _resolve_method(model: RBM, method: str) -> str:
    """``method``, with ``"auto"`` made ``"exact"`` (smaller layer ≤ MAX_EXACT_UNITS) or ``"anchored-ais"``."""
    if method != "auto":
        return method
    return "exact" if min(model.n_visible, model.n_hidden) <= MAX_EXACT_UNITS else "anchored-ais"


def estimate_for(
    model: RBM, method: str, params: dict[str, Any] | None, *, anchor_rows: torch.Tensor, seed: int
) -> LogZEstimate:
    """``estimate_log_z(model, _resolve_method(model, method), **params)``, seeded by ``seed``.

    Parameters
    ----------
    model : RBM
    method : str
        ``"auto"`` or any method of :func:`boltzlab.estimate_log_z`.
    params : dict, optional
        The method's options.
    anchor_rows : Tensor, shape (n_rows, n_visible), values 0/1
        Training rows: the ``check_data`` of a stochastic estimate (the verdict's witness
        starts there, and anchored AIS anchors there unless ``params`` say otherwise).
    seed : int
        The same seed and parameters give the same estimate.
    """
    method = _resolve_method(model, method)
    options = dict(params or {})
    if method != "exact":
        options.setdefault("check_data", anchor_rows.to(model.device, model.dtype))
    with distributed.local():  # a scikit-learn estimator is one process's object, even under torchrun
        return estimate_log_z(model, method, generator=make_generator(seed, model.device), **options)

"""RMSspectral: stochastic spectral descent with an RMS preconditioner, as a torch optimiser.

Carlson, Collins, Hsieh, Carin & Cevher (2015), *Preconditioned spectral descent for deep
learning* (NIPS), Algorithm 2; the non-Euclidean (spectral-norm) steepest descent it
preconditions is Carlson, Cevher & Carin (2015), *Stochastic spectral descent for restricted
Boltzmann machines* (AISTATS). The RTS paper trains its tracked RBMs with it (step 1e-5,
λ = 0.99; Carlson et al. 2016, §4.4).

For a weight matrix with gradient ``G`` and running mean square ``V ← λV + (1−λ)G⊙G``,
``D = sqrt(V) + ε``:

    X = (G ⊘ sqrt(D))^♯ ⊘ sqrt(D),      W ← W − η·X,

where for a matrix ``A = U diag(s) Vᵀ`` the *sharp* operator of the Schatten-∞ (spectral)
norm is ``A^♯ = ‖s‖₁·U Vᵀ`` — the steepest-descent direction when the loss is smooth in the
spectral norm, which is the right geometry for the log-partition function of an RBM.
Vectors (biases) get the RMSprop step ``X = G ⊘ D``.

The gradient convention is torch's: ``.grad`` holds the gradient of the loss to *minimise*
(boltzlab's trainer writes the negative log-likelihood gradient there).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = ["RMSspectral", "sharp"]


def sharp(matrix: Tensor) -> Tensor:
    """``A^♯ = ‖s‖₁·U_r V_rᵀ`` for ``A = U diag(s) Vᵀ``; shape of ``matrix``.

    Only the ``r`` numerically nonzero singular directions take part (the usual rank
    tolerance ``s_max·max(shape)·eps``): the singular vectors of zero singular values are
    arbitrary, and keeping them would add an arbitrary direction to the step.
    """
    left, singular_values, right_transposed = torch.linalg.svd(matrix, full_matrices=False)
    tolerance = singular_values.amax() * max(matrix.shape) * torch.finfo(matrix.dtype).eps
    keep = (singular_values > tolerance).to(matrix.dtype)
    return singular_values.sum() * ((left * keep) @ right_transposed)


class RMSspectral(torch.optim.Optimizer):
    """Preconditioned spectral descent (RMSspectral).

    Parameters
    ----------
    params : iterable of Tensor or dict
        Parameters or parameter groups; 2-D parameters take spectral steps, others RMSprop.
    lr : float, default 1e-5
        Step size η.
    alpha : float in [0, 1), default 0.99
        Decay λ of the running mean square of the gradient.
    eps : float, default 1e-8
        Added to ``sqrt(V)`` so that never-updated entries do not divide by zero.
    """

    def __init__(
        self, params: Iterable[Any], lr: float = 1e-5, alpha: float = 0.99, eps: float = 1e-8
    ) -> None:
        if not lr > 0:
            raise ValidationError(f"lr must be > 0, got {lr}")
        if not 0.0 <= alpha < 1.0:
            raise ValidationError(f"alpha must be in [0, 1), got {alpha}")
        if not eps > 0:
            raise ValidationError(f"eps must be > 0, got {eps}")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps})

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            for parameter in group["params"]:
                gradient = parameter.grad
                if gradient is None:
                    continue
                state = self.state[parameter]
                if not state:
                    state["mean_square"] = torch.zeros_like(parameter)
                mean_square = state["mean_square"]
                mean_square.mul_(alpha).addcmul_(gradient, gradient, value=1.0 - alpha)
                scale = mean_square.sqrt().add_(eps)
                if parameter.dim() == 2:
                    root = scale.sqrt()
                    direction = sharp(gradient / root).div_(root)
                else:
                    direction = gradient / scale
                parameter.add_(direction, alpha=-lr)
        return loss

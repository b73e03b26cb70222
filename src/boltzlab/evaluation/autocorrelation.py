"""Integrated autocorrelation time and effective sample size of a Markov chain's output.

For a stationary series ``x_t`` with autocorrelation ``ρ_k``, the integrated
autocorrelation time is

    τ = 1 + 2 Σ_{k≥1} ρ_k = S(0) / Var(x),

the factor by which correlation inflates the variance of a sample mean: ``Var(x̄) ≈ τ·Var(x)/n``,
so ``n/τ`` steps are worth as much as independent draws (the effective sample size). Two
estimators are offered:

* ``"sokal"`` — the FFT autocovariance summed up to Sokal's adaptive window, the smallest
  ``M`` with ``M ≥ c·τ(M)``, τ(M) floored at 1 so that anticorrelated series get at least
  ``c`` lags (Sokal 1997, *Monte Carlo methods in statistical mechanics*;
  Madras & Sokal 1988, J. Stat. Phys. 50, for the standard error
  ``Var(τ̂) ≈ 2(2M + 1)/n · τ²``). For several chains the autocovariances are averaged over
  chains before the window is chosen, as emcee does (Foreman-Mackey et al. 2013).
* ``"ar"`` — fit an AR(p) model by Yule–Walker, order by AIC, and take its spectral density
  at zero over its variance,

      τ = (σ²_ε / (1 − Σ_k φ_k)²) / σ²_x = (1 − Σ_k φ_k ρ_k) / (1 − Σ_k φ_k)²,

  the estimator of Thompson (2010, *A comparison of methods for computing autocorrelation
  time*, arXiv:1011.0175; R package SamplerCompare, ``ar.act``), which the flip-the-state
  paper (Brügge, Fischer & Igel 2013, §5) used for its autocorrelation-time tables. As in
  SamplerCompare the order is at least 1 and at most ``min(n − 1, ⌊10·log₁₀ n⌋)`` (R's
  ``ar.yw`` default).

The two can disagree, and the disagreement is informative. The AR fit extrapolates the
decay of the first ``p`` lags; it is far more precise when the series really is
autoregressive (for AR(1) with φ = 0.9 its spread is a quarter of Sokal's), but a slow
component visible only at long lags — chains of a multimodal model sitting in different
modes, which the pooled autocovariance shows as a long plateau — is missed, and τ is then
underestimated. Sokal's window sees the plateau but is noisy. Report both.

An estimate from a chain shorter than 50 τ is flagged ``reliable=False`` and a
:class:`ShortChainWarning` is issued (the emcee rule); the estimate is still returned.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy import fft
from torch import Tensor

from boltzlab.errors import ValidationError

__all__ = [
    "AutocorrelationTime",
    "ShortChainWarning",
    "autocorrelation_function",
    "autocovariance",
    "effective_sample_size",
    "integrated_autocorrelation_time",
]

_METHODS = ("sokal", "ar")
# emcee's rule of thumb: below 50 τ steps per chain, τ itself is poorly estimated.
_MIN_STEPS_PER_TAU = 50.0


class ShortChainWarning(UserWarning):
    """The chain is too short (or the window never closed) for a trustworthy τ estimate."""


@dataclass(frozen=True)
class AutocorrelationTime:
    """An integrated-autocorrelation-time estimate.

    Attributes
    ----------
    tau : float
        Integrated autocorrelation time, in steps of the series (1 for independent draws;
        below 1 for anticorrelated series). NaN when the series is constant.
    stderr : float
        Approximate standard error of ``tau``: Madras–Sokal for ``"sokal"``, the delta
        method on the Yule–Walker coefficients' asymptotic covariance for ``"ar"``.
    method : str
        ``"sokal"`` or ``"ar"``.
    window : int
        ``"sokal"``: the summation window ``M`` (lags 1..M are summed). ``"ar"``: the
        order ``p`` of the fitted AR model.
    n_steps, n_chains : int
        Shape of the series the estimate came from.
    reliable : bool
        False when ``n_steps < 50·tau``, when Sokal's window never closed, or when ``tau``
        is not finite and positive.
    """

    tau: float
    stderr: float
    method: str
    window: int
    n_steps: int
    n_chains: int
    reliable: bool

    @property
    def effective_sample_size(self) -> float:
        """``n_steps·n_chains / tau``: the number of independent draws the series is worth."""
        return self.n_steps * self.n_chains / self.tau


def _as_series(x: Any, name: str = "x") -> np.ndarray:
    """``x`` as a float64 array of shape ``(n_steps, n_chains)``."""
    if isinstance(x, Tensor):
        array = x.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        try:
            array = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValidationError(f"{name} could not be read as a numeric array: {error}") from None
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ValidationError(
            f"{name} must have shape (n_steps,) or (n_steps, n_chains), got shape {array.shape}"
        )
    if array.shape[0] < 3 or array.shape[1] < 1:
        raise ValidationError(f"{name} needs at least 3 steps and 1 chain, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValidationError(f"{name} contains NaN or infinite values")
    return array


def _autocovariance(series: np.ndarray, max_lag: int, center: str) -> np.ndarray:
    """Pooled biased autocovariance ``γ_0..γ_max_lag`` of a ``(n_steps, n_chains)`` array."""
    n_steps = series.shape[0]
    mean = series.mean() if center == "pooled" else series.mean(axis=0, keepdims=True)
    centred = series - mean
    # Zero-padding to ≥ 2n turns the circular correlation of the FFT into the linear one.
    size = fft.next_fast_len(2 * n_steps)
    spectrum = fft.rfft(centred, n=size, axis=0)
    lagged = fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[: max_lag + 1]
    # Dividing by n (not n − k) keeps the estimate positive semi-definite, which makes the
    # Yule–Walker fit stationary and the Sokal sum well behaved at large lags.
    return lagged.mean(axis=1) / n_steps


def _check_center(center: str) -> str:
    if center not in ("pooled", "chain"):
        raise ValidationError(f"center must be 'pooled' or 'chain', got {center!r}")
    return center


def autocovariance(x: Any, *, max_lag: int | None = None, center: str = "pooled") -> np.ndarray:
    """Autocovariance of a series, averaged over independent chains.

    Parameters
    ----------
    x : array or Tensor, shape (n_steps,) or (n_steps, n_chains)
    max_lag : int, optional
        Largest lag returned (default ``n_steps − 1``).
    center : {"pooled", "chain"}, default "pooled"
        Subtract the grand mean over all chains (so that chains stuck in different modes
        show up as long correlation), or each chain's own mean (emcee's choice; it hides
        between-chain differences but removes the bias of a common mean from short chains).

    Returns
    -------
    ndarray, shape (max_lag + 1,), float64
        ``γ_k = (1/n) Σ_t (x_t − x̄)(x_{t+k} − x̄)``, averaged over chains.
    """
    series = _as_series(x)
    n_steps = series.shape[0]
    max_lag = n_steps - 1 if max_lag is None else int(max_lag)
    if not 0 <= max_lag < n_steps:
        raise ValidationError(f"max_lag must be in [0, {n_steps - 1}], got {max_lag}")
    return _autocovariance(series, max_lag, _check_center(center))


def autocorrelation_function(x: Any, *, max_lag: int | None = None, center: str = "pooled") -> np.ndarray:
    """Normalised autocorrelation ``ρ_k = γ_k/γ_0``; shape ``(max_lag + 1,)``, ``ρ_0 = 1``.

    See :func:`autocovariance` for the arguments. A constant series gives NaNs.
    """
    covariance = autocovariance(x, max_lag=max_lag, center=center)
    with np.errstate(invalid="ignore", divide="ignore"):
        return covariance / covariance[0]


def _sokal(covariance: np.ndarray, c: float, n_total: int) -> tuple[float, float, int, bool]:
    rho = covariance / covariance[0]
    partial_taus = 2.0 * np.cumsum(rho) - 1.0  # τ(M) = 1 + 2 Σ_{k=1}^{M} ρ_k
    lags = np.arange(rho.size)
    # Sokal's rule M ≥ c·τ(M), with τ(M) floored at 1 so that the window spans at least c
    # lags: an anticorrelated series (flip-the-state can oscillate) has τ(M) < 1 and would
    # otherwise stop after a lag or two. Its alternating tail still biases τ by about
    # 2|ρ_{M+1}|; use c = 10, or method="ar", for such series.
    closed = lags >= c * np.maximum(partial_taus, 1.0)
    converged = bool(closed.any())
    window = int(np.argmax(closed)) if converged else rho.size - 1
    tau = float(partial_taus[window])
    stderr = abs(tau) * math.sqrt(2.0 * (2 * window + 1) / n_total)
    return tau, stderr, window, converged


def _levinson_durbin(covariance: np.ndarray, max_order: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Yule–Walker AR coefficients of every order 1..max_order and their innovation variances.

    Returns the coefficient vectors (``phis[p − 1]`` has length p) and ``σ²_0..σ²_max_order``.
    """
    variances = np.empty(max_order + 1)
    variances[0] = covariance[0]
    phis: list[np.ndarray] = []
    phi = np.zeros(0)
    for order in range(1, max_order + 1):
        reflection = (covariance[order] - phi @ covariance[order - 1 : 0 : -1]) / variances[order - 1]
        phi = np.concatenate([phi - reflection * phi[::-1], [reflection]])
        variances[order] = variances[order - 1] * (1.0 - reflection**2)
        phis.append(phi)
    return phis, variances


def _ar_autocorrelation(phi: np.ndarray) -> np.ndarray:
    """``ρ_1..ρ_p`` of the stationary AR(p) process with coefficients ``phi``.

    Solves ``ρ_k = Σ_j φ_j ρ_{|k−j|}`` (k = 1..p, ρ_0 = 1) as a p×p linear system; the
    ``j = k`` terms ``φ_k·ρ_0`` form the right-hand side.
    """
    order = phi.size
    rows, columns = np.meshgrid(np.arange(order), np.arange(order), indexing="ij")
    lags = np.abs(rows - columns)  # |k − j| for k = rows + 1, j = columns + 1
    off_diagonal = lags > 0
    system = np.eye(order)
    np.add.at(system, (rows[off_diagonal], lags[off_diagonal] - 1), -phi[columns[off_diagonal]])
    return np.linalg.solve(system, phi)


def _ar_tau(phi: np.ndarray) -> float:
    rho = _ar_autocorrelation(phi)
    return float((1.0 - phi @ rho) / (1.0 - phi.sum()) ** 2)


def _ar(covariance: np.ndarray, n_total: int, max_order: int) -> tuple[float, float, int]:
    phis, variances = _levinson_durbin(covariance, max_order)
    # AIC of the Gaussian AR(p) likelihood, as R's ar.yw; order ≥ 1 as in SamplerCompare,
    # so that an almost-white series still gets a standard error.
    with np.errstate(divide="ignore"):
        aic = n_total * np.log(np.maximum(variances, np.finfo(float).tiny)) + 2.0 * np.arange(max_order + 1)
    order = int(np.argmin(aic[1:])) + 1
    phi = phis[order - 1]
    # Yule–Walker reproduces the sample autocorrelations ρ_1..ρ_p exactly, so this equals
    # (1 − Σφρ̂)/(1 − Σφ)²; computing it from φ alone lets the delta method differentiate it.
    tau = _ar_tau(phi)
    # Delta method: Cov(φ̂) ≈ σ²_ε Γ_p⁻¹ / n (Brockwell & Davis 1991, §8.10), gradient of
    # τ(φ) by central differences (p ≤ ~50, so 2p small solves).
    toeplitz = covariance[np.abs(np.subtract.outer(np.arange(order), np.arange(order)))]
    phi_covariance = variances[order] * np.linalg.inv(toeplitz) / n_total
    # A step relative to 1 − Σφ, the quantity τ is most sensitive to (τ ∝ (1 − Σφ)⁻²).
    step = 1e-5 * (1.0 - phi.sum())
    gradient = np.empty(order)
    for index in range(order):
        shift = np.zeros(order)
        shift[index] = step
        gradient[index] = (_ar_tau(phi + shift) - _ar_tau(phi - shift)) / (2 * step)
    stderr = float(math.sqrt(max(gradient @ phi_covariance @ gradient, 0.0)))
    return tau, stderr, order


def integrated_autocorrelation_time(
    x: Any,
    *,
    method: str = "sokal",
    c: float = 5.0,
    max_order: int | None = None,
    center: str = "pooled",
    warn: bool = True,
) -> AutocorrelationTime:
    """Integrated autocorrelation time of a series or of a batch of independent chains.

    Parameters
    ----------
    x : array or Tensor, shape (n_steps,) or (n_steps, n_chains)
        The series (e.g. the energy after every sweep); chains are assumed independent and
        of the same stationary distribution, and are pooled through their averaged
        autocovariance.
    method : {"sokal", "ar"}, default "sokal"
        Adaptive-window FFT estimator, or AR(p) spectral density at zero (see module docstring).
    c : float, default 5.0
        Sokal's window constant (``"sokal"`` only): ``M`` is the smallest lag with
        ``M ≥ c·max(τ(M), 1)``. 5 suits chains whose autocorrelation decays roughly
        exponentially; use 10 for slower or oscillating (anticorrelated) ones.
    max_order : int, optional
        Largest AR order tried (``"ar"`` only); default ``min(n_steps − 1, ⌊10·log₁₀ n_steps⌋)``.
    center : {"pooled", "chain"}, default "pooled"
        See :func:`autocovariance`.
    warn : bool, default True
        Issue a :class:`ShortChainWarning` when the estimate is unreliable.

    Returns
    -------
    AutocorrelationTime

    Examples
    --------
    >>> import numpy as np
    >>> noise = np.random.default_rng(0).standard_normal(10_000)
    >>> round(integrated_autocorrelation_time(noise).tau, 1)
    1.0
    """
    if method not in _METHODS:
        raise ValidationError(f"method must be one of {', '.join(_METHODS)}, got {method!r}")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        raise ValidationError(f"c must be a positive number, got {c!r}")
    series = _as_series(x)
    _check_center(center)
    n_steps, n_chains = series.shape
    n_total = n_steps * n_chains
    if method == "sokal":
        covariance = _autocovariance(series, n_steps - 1, center)
    else:
        default_order = min(n_steps - 1, math.floor(10.0 * math.log10(n_steps)))
        if max_order is None:
            max_order = default_order
        elif isinstance(max_order, bool) or not isinstance(max_order, (int, np.integer)):
            raise ValidationError(f"max_order must be a positive integer, got {max_order!r}")
        if not 1 <= max_order < n_steps:
            raise ValidationError(f"max_order must be in [1, {n_steps - 1}], got {max_order}")
        covariance = _autocovariance(series, int(max_order), center)

    if not covariance[0] > 0:
        result = AutocorrelationTime(
            tau=math.nan,
            stderr=math.nan,
            method=method,
            window=0,
            n_steps=n_steps,
            n_chains=n_chains,
            reliable=False,
        )
        if warn:
            warnings.warn(
                "the series is constant: its autocorrelation time is undefined",
                ShortChainWarning,
                stacklevel=2,
            )
        return result

    if method == "sokal":
        tau, stderr, window, converged = _sokal(covariance, float(c), n_total)
    else:
        tau, stderr, window = _ar(covariance, n_total, int(max_order))
        converged = True
    # A τ ≤ 0 is impossible for a stationary series (its sample mean would have no variance);
    # Sokal's sum gives one when noise at long lags dominates a too-short chain.
    reliable = bool(converged and math.isfinite(tau) and tau > 0 and n_steps >= _MIN_STEPS_PER_TAU * tau)
    if warn and not reliable:
        if not converged:
            reason = f"Sokal's window did not close within {n_steps - 1} lags"
        elif not tau > 0:
            reason = "the summed autocorrelations are not positive (noise dominates)"
        else:
            reason = f"{n_steps} steps per chain is less than {_MIN_STEPS_PER_TAU:g}·τ = {_MIN_STEPS_PER_TAU * tau:.0f}"
        warnings.warn(
            f"autocorrelation time τ ≈ {tau:.3g} ({method}) is unreliable: {reason}; run longer chains",
            ShortChainWarning,
            stacklevel=2,
        )
    return AutocorrelationTime(
        tau=tau,
        stderr=stderr,
        method=method,
        window=window,
        n_steps=n_steps,
        n_chains=n_chains,
        reliable=reliable,
    )


def effective_sample_size(x: Any, *, method: str = "sokal", c: float = 5.0, center: str = "pooled") -> float:
    """``n_steps·n_chains / τ``: how many independent draws the series is worth.

    Parameters are those of :func:`integrated_autocorrelation_time`; ``x`` has shape
    ``(n_steps,)`` or ``(n_steps, n_chains)``.
    """
    return integrated_autocorrelation_time(x, method=method, c=c, center=center).effective_sample_size

"""A continuous test family with a known partition function at every β: Gaussian mixtures.

The target is an unnormalised mixture of isotropic Gaussians in ``d`` dimensions whose means
lie on one line through the origin,

    f(x) = Z · Σ_c w_c N(x; a_c u, σ² I),        Σ_c w_c = 1,  ‖u‖ = 1,

so ``log Z(1) = log Z`` by construction, and the normalised base is ``p1 = N(0, s² I)``.
The tempered family is the geometric path of docs/architecture.md and docs/algorithms.md §1.3,

    log f_β(x) = β·log f(x) + (1 − β)·log p1(x),        Z(0) = 1,  Z(1) = Z.

**Exact answers.** The path of a mixture is not a mixture, so ``Z(β)`` has no closed form
for ``0 < β < 1``. Because the means are collinear with the base's mean, writing
``x = t·u + y`` with ``y ⊥ u`` splits ``f_β`` into a Gaussian in the ``d − 1`` coordinates
``y`` (precision ``λ_β = β/σ² + (1 − β)/s²``) times a one-dimensional function of ``t``, so
``log Z(β)`` is one quadrature in ``t`` (exact to float64 rounding) and exact samples at any
β need only a rejection sampler in ``t``; :mod:`boltzlab.models.toy_exact` holds both.

The family fits the summed-out protocol of :mod:`boltzlab.models.base` with nothing summed
out: ``update_groups = ((), (0,))``, ``MarginalTerms(base=log p1, linear=log f,
preactivation of shape (n, 0))``, so ``log_f_marginal``, ``log_f_marginal_all`` and
``path_derivative`` apply unchanged. Chains hold ``layers = (x,)`` with real ``x`` of shape
``(n, d)``; they are moved by :class:`~boltzlab.operators.hmc.HMCOperator`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from boltzlab.chains import Chains
from boltzlab.errors import ValidationError
from boltzlab.models.base import MarginalTerms, chains_at
from boltzlab.models.parameters import check_dtype
from boltzlab.models.toy_exact import MixtureParameters, exact_log_z, sample_line_coordinates
from boltzlab.rng import randn, resolve_generator
from boltzlab.validation import check_device, check_positive_int, check_probability, require

__all__ = ["GaussianMixtureFamily"]


def _as_float_vector(value: Sequence[float] | Tensor, name: str) -> Tensor:
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64).detach().clone().cpu()
    except (TypeError, ValueError, RuntimeError) as error:
        raise ValidationError(f"{name} could not be read as numbers: {error}") from None
    require(tensor.dim() == 1 and tensor.numel() >= 1, f"{name} must be a non-empty 1-D sequence")
    require(bool(torch.isfinite(tensor).all()), f"{name} must be finite, got {tensor.tolist()}")
    return tensor


def _positive_float(value: float, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be a positive number, got {value!r}") from None
    require(math.isfinite(number) and number > 0.0, f"{name} must be a positive number, got {value!r}")
    return number


class GaussianMixtureFamily(nn.Module):
    """Tempered family from ``N(0, s²I)`` to ``Z·Σ_c w_c N(a_c u, σ²I)`` with exact ``log Z(β)``.

    The defaults are the test family of boltzlab's estimator tests: two well-separated
    10-dimensional Gaussians (means 6σ apart, weights 1/4 and 3/4) along the diagonal
    direction, a base three times wider than the components, and
    ``log Z = 5·log 2π ≈ 9.189`` (each component an unnormalised bump
    ``w_c exp(−‖x − μ_c‖²/(2σ²))``).

    Parameters
    ----------
    dimension : int, default 10
        ``d``, the number of real coordinates of a state.
    positions : sequence of float, shape (C,), default (-3.0, 3.0)
        ``a_c``: signed distances of the component means from the base mean along ``u``.
    weights : sequence of float, shape (C,), default (0.25, 0.75)
        Positive relative component weights; normalised to sum to one.
    component_std : float, default 1.0
        ``σ``, the standard deviation of every component in every coordinate.
    base_std : float, default 3.0
        ``s``, the standard deviation of the base ``p1 = N(0, s²I)``.
    log_z : float, optional
        ``log Z`` of the target. Default ``(d/2)·log 2πσ²``, which makes
        ``f(x) = Σ_c w_c exp(−‖x − a_c u‖²/(2σ²))``.
    direction : sequence of float, shape (d,), optional
        The line of the means; normalised to ``u``. Default ``(1, …, 1)/√d`` (not a
        coordinate axis, so that a transposed coordinate shows in tests).
    dtype : torch.dtype, default float64
        dtype of the chains (and of the stored parameters). Densities, gradients and
        ``log Z`` are always computed in float64 from the stored values.
    device : str or torch.device, default "cpu"

    Attributes
    ----------
    layer_sizes : tuple of int
        ``(d,)``: one real-valued layer.
    update_groups : tuple of tuple of int
        ``((), (0,))``: nothing summed out, then the one layer.
    log_z : float
        ``log Z`` of the target (β = 1), in nats.

    Examples
    --------
    >>> import boltzlab as bl
    >>> model = bl.models.GaussianMixtureFamily()
    >>> round(model.exact_log_z(1.0), 4), model.exact_log_z(0.0)
    (9.1894, 0.0)
    >>> chains = model.init_chains(13, generator=0)
    >>> tuple(chains.layers[0].shape)
    (13, 10)
    """

    update_groups: tuple[tuple[int, ...], ...] = ((), (0,))
    #: The one layer is real-valued: no log-odds and no exact conditional draw (HMC moves it).
    layer_kinds: tuple[str, ...] = ("real",)

    def __init__(
        self,
        dimension: int = 10,
        *,
        positions: Sequence[float] | Tensor = (-3.0, 3.0),
        weights: Sequence[float] | Tensor = (0.25, 0.75),
        component_std: float = 1.0,
        base_std: float = 3.0,
        log_z: float | None = None,
        direction: Sequence[float] | Tensor | None = None,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        dimension = check_positive_int(dimension, "dimension")
        check_dtype(dtype, (torch.float32, torch.float64), described="float32 or float64")
        positions_t = _as_float_vector(positions, "positions")
        weights_t = _as_float_vector(weights, "weights")
        require(
            weights_t.shape == positions_t.shape,
            f"weights has {weights_t.numel()} entries but positions has {positions_t.numel()}: one per component",
        )
        require(bool((weights_t > 0).all()), f"weights must be positive, got {weights_t.tolist()}")
        self.component_std = _positive_float(component_std, "component_std")
        self.base_std = _positive_float(base_std, "base_std")
        if direction is None:
            direction_t = torch.ones(dimension, dtype=torch.float64)
        else:
            direction_t = _as_float_vector(direction, "direction")
            require(
                direction_t.shape == (dimension,),
                f"direction must have shape ({dimension},), got {tuple(direction_t.shape)}",
            )
        require(float(direction_t.norm()) > 0.0, "direction must not be the zero vector")
        if log_z is None:
            log_z = 0.5 * dimension * math.log(2.0 * math.pi * self.component_std**2)
        require(math.isfinite(float(log_z)), f"log_z must be finite, got {log_z!r}")
        self.log_z = float(log_z)
        device = check_device(device)
        # Stored in the chains' dtype (so .to() moves them like any module); every use
        # upcasts and renormalises them in float64, so densities, gradients, exact samples
        # and exact log Z all refer to one and the same distribution.
        self.register_buffer("positions", positions_t.to(device=device, dtype=dtype))
        self.register_buffer("weights", (weights_t / weights_t.sum()).to(device=device, dtype=dtype))
        self.register_buffer("direction", (direction_t / direction_t.norm()).to(device=device, dtype=dtype))
        self._cache_key: tuple | None = None
        self._cache: MixtureParameters | None = None

    # ------------------------------------------------------------------ properties
    @property
    def dimension(self) -> int:
        return self.direction.shape[0]

    @property
    def n_components(self) -> int:
        return self.positions.shape[0]

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        return (self.dimension,)

    @property
    def dtype(self) -> torch.dtype:
        return self.direction.dtype

    @property
    def device(self) -> torch.device:
        return self.direction.device

    @property
    def unit_direction(self) -> Tensor:
        """``u``, float64, shape ``(d,)``, unit norm (a copy)."""
        return self._float64().direction.clone()

    @property
    def log_weights(self) -> Tensor:
        """``log w_c``, float64, shape ``(C,)``, normalised (a copy)."""
        return self._float64().log_weights.clone()

    @property
    def means(self) -> Tensor:
        """Component means ``a_c u``, float64, shape ``(C, d)``."""
        parameters = self._float64()
        return parameters.positions[:, None] * parameters.direction[None, :]

    def _float64(self) -> MixtureParameters:
        """The parameters in float64, normalised; recomputed only when a buffer changes.

        On 10-dimensional states every op costs microseconds of overhead whatever its size,
        and a gradient is only about ten ops, so recomputing these on each call would be a
        visible share of it. The key holds the buffers themselves (replaced by ``.to()``),
        their in-place versions, and the two standard deviations.
        """
        buffers = self._buffers
        direction, positions, weights = buffers["direction"], buffers["positions"], buffers["weights"]
        key = self._cache_key
        scalars = (
            direction._version,
            positions._version,
            weights._version,
            self.component_std,
            self.base_std,
        )
        if (
            key is None
            or key[0] is not direction
            or key[1] is not positions
            or key[2] is not weights
            or key[3] != scalars
        ):
            direction64 = direction.to(torch.float64)
            positions64 = positions.to(torch.float64)
            weights64 = weights.to(torch.float64)
            log_weights = torch.log(weights64 / weights64.sum())
            variance = self.component_std**2
            self._cache = MixtureParameters(
                direction=direction64 / direction64.norm(),
                positions=positions64,
                log_weights=log_weights,
                offsets=log_weights - positions64.square() / (2.0 * variance),
                slopes=positions64 / variance,
                component_std=self.component_std,
                base_std=self.base_std,
            )
            self._cache_key = (direction, positions, weights, scalars)
        return self._cache

    def extra_repr(self) -> str:
        return (
            f"dimension={self.dimension}, positions={self.positions.tolist()}, "
            f"weights={[round(w, 6) for w in self.weights.tolist()]}, component_std={self.component_std}, "
            f"base_std={self.base_std}, log_z={self.log_z:.6g}, dtype={self.dtype}"
        )

    # ------------------------------------------------------------------ densities
    def _line_coordinate(self, x64: Tensor) -> Tensor:
        """``t = x·u``, float64, shape ``(n,)``."""
        return x64 @ self._float64().direction

    def _log_densities(self, x: Tensor) -> MarginalTerms:
        """``log p1(x)`` and ``log f(x)`` (float64, shape ``(n,)``) from one pass over ``x``.

        ``‖x − a_c u‖² = ‖x‖² − 2 a_c t + a_c²``, so
        ``log f(x) = log Z − (d/2) log 2πσ² − ‖x‖²/(2σ²) + log Σ_c exp(offset_c + slope_c t)``.
        """
        x64 = x.to(torch.float64)
        t = self._line_coordinate(x64)
        squared_norm = x64.square().sum(1)
        base_variance, variance = self.base_std**2, self.component_std**2
        base_constant = -0.5 * self.dimension * math.log(2.0 * math.pi * base_variance)
        target_constant = self.log_z - 0.5 * self.dimension * math.log(2.0 * math.pi * variance)
        return MarginalTerms(
            base=squared_norm * (-0.5 / base_variance) + base_constant,
            linear=torch.logsumexp(self._float64().shifted_log_terms(t), 1)
            - squared_norm * (0.5 / variance)
            + target_constant,
            preactivation=x.new_empty((x.shape[0], 0)),
        )

    def energy(self, layers: tuple[Tensor, ...]) -> Tensor:
        """``E(x) = −log f(x)`` of the target; float64, shape ``(n,)``."""
        return -self._log_densities(layers[0]).linear

    def log_f(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> Tensor:
        """``β·log f(x) + (1 − β)·log p1(x)``; float64, shape ``(n,)``.

        ``beta`` is a scalar or has shape ``(n,)`` (one inverse temperature per state).
        """
        terms = self._log_densities(layers[0])
        beta_t = torch.as_tensor(beta, dtype=torch.float64, device=terms.base.device)
        return (1.0 - beta_t) * terms.base + beta_t * terms.linear

    def log_f_gradient(self, layers: tuple[Tensor, ...], beta: Tensor | float) -> tuple[Tensor, ...]:
        """``∇_x log f_β(x)`` in closed form, one tensor per layer; float64, shape ``(n, d)``.

        With ``r_c(t)`` the component responsibilities,
        ``∇ log f = Σ_c r_c (a_c u − x)/σ²`` and ``∇ log p1 = −x/s²``, so

            ∇ log f_β(x) = (β/σ²)·(Σ_c r_c a_c)·u − λ_β·x,   λ_β = β/σ² + (1 − β)/s².

        ``beta``: a scalar or shape ``(n,)``.
        """
        x64 = layers[0].to(torch.float64)
        parameters = self._float64()
        responsibilities = torch.softmax(parameters.shifted_log_terms(self._line_coordinate(x64)), 1)
        beta_t = torch.as_tensor(beta, dtype=torch.float64, device=x64.device)
        if beta_t.dim() == 0:
            beta_t = beta_t.expand(x64.shape[0])
        pull = torch.outer((responsibilities @ parameters.slopes).mul_(beta_t), parameters.direction)
        return (torch.addcmul(pull, parameters.precision(beta_t)[:, None], x64, value=-1.0),)

    def marginal_terms(self, layers: tuple[Tensor, ...] | Tensor) -> MarginalTerms:
        """``base = log p1(x)``, ``linear = log f(x)``, and an empty ``(n, 0)`` pre-activation.

        Nothing is summed out, so ``log_f_marginal(terms, β)`` is exactly :meth:`log_f`.
        """
        x = layers[0] if isinstance(layers, tuple) else layers
        with torch.no_grad():
            return self._log_densities(x)

    def conditional_logits(self, index: int, layers: tuple[Tensor, ...], beta: Tensor) -> Tensor:
        """Not defined: the layer is real-valued, so there are no log-odds to give.

        Raises :class:`ValidationError` pointing to the ``"hmc"`` operator, so that a
        layerwise operator (Gibbs, flip) used on this model fails with a readable message.
        """
        raise ValidationError(
            "GaussianMixtureFamily has a real-valued layer and no binary conditionals; sample it "
            "with operator='hmc' (boltzlab.operators.HMCOperator), not a layerwise operator"
        )

    def length_scale(self, beta: Tensor | float) -> Tensor:
        """``λ_β^{-1/2}``, the standard deviation of ``p_β`` across the line of the means.

        Also the width of every bump of ``p_β`` along the line; HMC with ``adapt=True`` scales
        its step with it. float64, the shape of ``beta``.
        """
        beta_t = torch.as_tensor(beta, dtype=torch.float64)
        return self._float64().precision(beta_t).rsqrt()

    # ------------------------------------------------------------------ exact answers
    def exact_log_z(self, beta: float = 1.0) -> float:
        """``log Z(β)`` of the tempered family, in nats (module docstring).

        Closed form at β = 0 (0, the base is normalised) and β = 1 (``log_z``); trapezoid
        quadrature of the one-dimensional factor in between, exact to float64 rounding.

        Parameters
        ----------
        beta : float in [0, 1], default 1.0
        """
        beta = check_probability(beta, "beta")
        if beta == 0.0:
            return 0.0
        if beta == 1.0:
            return self.log_z
        return exact_log_z(self._float64(), beta, log_z=self.log_z)

    # ------------------------------------------------------------------ sampling
    def init_chains(
        self, n_chains: int, *, generator: torch.Generator | int | None = None, beta: float = 0.0
    ) -> Chains:
        """``n_chains`` exact samples of the base ``N(0, s²I)`` (β = 0).

        ``beta`` only labels the chains. Drawn in float64 and rounded to the model's dtype,
        so float32 and float64 models give the same states for the same seed.
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        generator = resolve_generator(generator, self.device)
        x = randn((n_chains, self.dimension), generator=generator, dtype=torch.float64, device=self.device)
        return chains_at(((x * self.base_std).to(self.dtype),), beta)

    def sample_exact(
        self, n_chains: int, *, beta: float = 1.0, generator: torch.Generator | int | None = None
    ) -> Chains:
        """``n_chains`` independent exact samples of ``p_β``, as chains at β.

        ``t`` by rejection from the bumps' mixture (module docstring), ``y`` Gaussian with
        precision ``λ_β`` across ``u``. At β = 0 this is the base, at β = 1 the mixture.

        Parameters
        ----------
        n_chains : int
        beta : float in [0, 1], default 1.0
        generator : torch.Generator or int, optional
        """
        n_chains = check_positive_int(n_chains, "n_chains")
        beta = check_probability(beta, "beta")
        generator = resolve_generator(generator, self.device)
        parameters = self._float64()
        t = sample_line_coordinates(parameters, n_chains, beta, generator=generator)
        u = parameters.direction
        z = torch.randn(
            n_chains, self.dimension, generator=generator, dtype=torch.float64, device=self.device
        )
        # y: the Gaussian across the line, precision λ_β in every direction orthogonal to u.
        y = (z - (z @ u)[:, None] * u[None, :]) * float(parameters.precision(beta)) ** -0.5
        return chains_at(((t[:, None] * u[None, :] + y).to(self.dtype),), beta)

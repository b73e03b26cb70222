"""The SLEM study of flip-the-state against Gibbs (Brügge, Fischer & Igel 2013, Fig. 3, upper).

:func:`run_slem` is the study's first part; :func:`slem_study` the computation on any sizes.

For random RBMs with weights ``W_ij ~ U[−c, c]`` and zero biases, compare the second-largest
eigenvalue modulus (SLEM) of the exact joint-space sweep matrices ``T_h T_v`` of two
operators, and report the fraction of models where the first (flip-the-state) has the
smaller SLEM — a smaller SLEM means a faster worst-case geometric convergence,
``‖p_0 Tⁿ − p‖ = O(SLEMⁿ)``.

Which matrix (docs/open-questions.md item 21): the paper does not say whether the SLEM is taken on
the joint (v, h) chain or on the visible marginal; we use the joint chain of the
hidden-first sweep ``T_h T_v``, the order the paper's ergodicity proof uses, built by
:func:`boltzlab.evaluation.transition_matrix` from the operators' own ``probability_on``
(:func:`boltzlab.evaluation.operator_slem` does it for one operator and one model).
The paper's curve values are not in our copy of it; docs/algorithms.md §2.2 records the shape to
expect (near 0 at c = 1, rising with c).

Measured (``slem_study(generator=2013)``: 100 models per point, binomial standard error
≤ 0.05; about 75 s on one core): fraction with SLEM(flip) < SLEM(Gibbs)

    c      1     2     3     4     5     6     7     8     9     10
    2×2  0.00  0.08  0.38  0.62  0.70  0.75  0.69  0.70  0.76  0.75
    3×3  0.00  0.06  0.37  0.57  0.66  0.65  0.66  0.76  0.86  0.82
    4×4  0.00  0.19  0.53  0.67  0.73  0.73  0.77  0.80  0.85  0.85

— zero at c = 1, rising with c. The 4×4 curve lies above the smaller ones for c = 2–5
(by 2–3 standard errors), in line with the paper's remark that the effect grows with model
size; 3×3 is not above 2×2. To redraw the figure::

    from matplotlib.figure import Figure
    from boltzlab.plotting import save_figure
    from boltzlab_experiments.flip_the_state.plots import plot_slem_fraction
    from boltzlab_experiments.flip_the_state.slem import slem_study
    figure = Figure(figsize=(6, 4), layout="constrained")
    plot_slem_fraction(figure.add_subplot(), slem_study(generator=2013))
    save_figure(figure, "slem-fraction.png")

A closed form to check against: with zero weights the two layers update independently and
every unit is a two-state chain of its own. Gibbs draws it afresh (eigenvalue 0), flip-the-
state moves it as ``[[1 − r, r], [1, 0]]`` from the more probable state with
``r = e^{−|b|} = (1 − p*)/p*``, whose second eigenvalue is ``−r``; with the tie rule a unit
with ``b = 0`` is drawn afresh. The joint sweep is their tensor product, so
``SLEM(Gibbs) = 0`` and ``SLEM(flip) = max_i e^{−|b_i|}`` over units with ``b_i ≠ 0``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from boltzlab import RBM
from boltzlab import operators as operator_registry
from boltzlab.errors import ValidationError
from boltzlab.evaluation.transition import MAX_UNITS, slem, transition_matrix
from boltzlab.operators import LayerwiseOperator
from boltzlab.rng import resolve_generator
from boltzlab.validation import check_positive_int
from boltzlab_experiments.flip_the_state.config import FlipTheStateConfig
from boltzlab_experiments.flip_the_state.seeds import base_seed, derive_seed

__all__ = ["SlemStudyResult", "run_slem", "slem_study"]


@dataclass(frozen=True)
class SlemStudyResult:
    """SLEMs of an operator and a reference operator on random RBMs.

    Attributes
    ----------
    sizes : tuple of (n_visible, n_hidden)
    scales : tuple of float
        The weight scales ``c`` (weights ``U[−c, c]``).
    n_models : int
        Random RBMs per (size, scale).
    operator, reference : str
        Names of the compared operators (default ``"flip"`` and ``"gibbs"``).
    slem_operator, slem_reference : Tensor, shape (n_sizes, n_scales, n_models), float64
        The SLEM of each model's joint-space sweep matrix ``T_h T_v``.
    """

    sizes: tuple[tuple[int, int], ...]
    scales: tuple[float, ...]
    n_models: int
    operator: str
    reference: str
    slem_operator: Tensor
    slem_reference: Tensor

    @property
    def n_smaller(self) -> Tensor:
        """Models where the operator's SLEM is strictly smaller; int64, shape (n_sizes, n_scales)."""
        return (self.slem_operator < self.slem_reference).sum(2)

    @property
    def fraction(self) -> Tensor:
        """Fraction of models where the operator's SLEM is smaller; shape (n_sizes, n_scales)."""
        return self.n_smaller.to(torch.float64) / self.n_models

    @property
    def fraction_stderr(self) -> Tensor:
        """Binomial standard error ``sqrt(f(1 − f)/n)`` of :attr:`fraction`."""
        fraction = self.fraction
        return torch.sqrt(fraction * (1.0 - fraction) / self.n_models)

    def table(self) -> str:
        """The fractions as a plain-text table, one row per scale, one column per size."""
        header = "c".rjust(6) + "".join(
            f"{n_visible}x{n_hidden}".rjust(10) for n_visible, n_hidden in self.sizes
        )
        rows = [header]
        for scale_index, scale in enumerate(self.scales):
            cells = "".join(
                f"{float(self.fraction[size_index, scale_index]):10.3f}"
                for size_index in range(len(self.sizes))
            )
            rows.append(f"{scale:6g}" + cells)
        return "\n".join(rows)


def _check_sizes(sizes: Iterable[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    checked = []
    for size in sizes:
        if len(size) != 2:
            raise ValidationError(f"sizes must hold (n_visible, n_hidden) pairs, got {size!r}")
        n_visible = check_positive_int(size[0], "sizes[...][0] (n_visible)")
        n_hidden = check_positive_int(size[1], "sizes[...][1] (n_hidden)")
        if n_visible + n_hidden > MAX_UNITS:
            raise ValidationError(
                f"sizes: {n_visible}x{n_hidden} has {n_visible + n_hidden} units; exact matrices need <= {MAX_UNITS}"
            )
        checked.append((n_visible, n_hidden))
    if not checked:
        raise ValidationError("sizes must not be empty")
    return tuple(checked)


def slem_study(
    sizes: Iterable[Sequence[int]] = ((2, 2), (3, 3), (4, 4)),
    scales: Iterable[float] = range(1, 11),
    n_models: int = 100,
    *,
    generator: torch.Generator | int | None = None,
    operator: str | LayerwiseOperator = "flip",
    reference: str | LayerwiseOperator = "gibbs",
    blas_threads: int | None = 1,
) -> SlemStudyResult:
    """SLEM of ``operator`` against ``reference`` on random zero-bias RBMs (paper's Fig. 3).

    For every size and scale ``c``, ``n_models`` RBMs with weights drawn independently from
    ``U[−c, c]`` (fresh draws for every (size, c), so fractions at different ``c`` are
    independent binomial counts) and zero biases.

    Parameters
    ----------
    sizes : iterable of (n_visible, n_hidden), default ((2, 2), (3, 3), (4, 4))
        At most 12 units each; 4×4 (256 joint states) takes about 20 ms per eigenproblem.
    scales : iterable of float, default 1..10
    n_models : int, default 100
    generator : torch.Generator or int, optional
        Source of the random weights.
    operator, reference : str or LayerwiseOperator, default "flip" and "gibbs"
    blas_threads : int or None, default 1
        BLAS threads for the eigenproblems. Small dense eigenproblems run fastest on one
        thread; on a busy machine a multithreaded OpenBLAS made a 256×256 problem 100×
        slower. ``None`` leaves the BLAS setting alone.

    Returns
    -------
    SlemStudyResult

    Examples
    --------
    >>> result = slem_study(sizes=[(2, 2)], scales=[1, 10], n_models=5, generator=0)
    >>> tuple(result.fraction.shape)
    (1, 2)
    """
    checked_sizes = _check_sizes(sizes)
    checked_scales = tuple(float(scale) for scale in scales)
    if not checked_scales or any(not scale >= 0 for scale in checked_scales):
        raise ValidationError(f"scales must be a non-empty list of numbers >= 0, got {checked_scales!r}")
    n_models = check_positive_int(n_models, "n_models")
    generator = resolve_generator(generator)
    op, ref = operator_registry.get(operator), operator_registry.get(reference)
    for name, value in (("operator", op), ("reference", ref)):
        if not isinstance(value, LayerwiseOperator):
            raise ValidationError(
                f"{name} must be a layerwise operator (gibbs, flip, mixture), got {value!r}"
            )

    shape = (len(checked_sizes), len(checked_scales), n_models)
    slem_operator = torch.empty(shape, dtype=torch.float64)
    slem_reference = torch.empty(shape, dtype=torch.float64)
    limits = None
    if blas_threads is not None:
        # threadpoolctl comes with scikit-learn, a dependency; imported here, where it is used.
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=blas_threads, user_api="blas")
    try:
        for size_index, (n_visible, n_hidden) in enumerate(checked_sizes):
            for scale_index, scale in enumerate(checked_scales):
                for model_index in range(n_models):
                    uniform = torch.rand(n_visible, n_hidden, generator=generator, dtype=torch.float64)
                    model = RBM(weights=(2.0 * uniform - 1.0) * scale, dtype=torch.float64)
                    slem_operator[size_index, scale_index, model_index] = slem(transition_matrix(model, op))
                    slem_reference[size_index, scale_index, model_index] = slem(transition_matrix(model, ref))
    finally:
        if limits is not None:
            limits.restore_original_limits()
    return SlemStudyResult(
        sizes=checked_sizes,
        scales=checked_scales,
        n_models=n_models,
        operator=getattr(op, "name", type(op).__name__),
        reference=getattr(ref, "name", type(ref).__name__),
        slem_operator=slem_operator,
        slem_reference=slem_reference,
    )


def run_slem(
    config: FlipTheStateConfig, *, generator: torch.Generator | int | None = None
) -> SlemStudyResult:
    """Fig. 3 (upper): :func:`slem_study` on the configured sizes and scales.

    ``generator`` (or an int seed) gives the base seed from which the weights' seed is derived.
    """
    return slem_study(
        config.slem_sizes,
        config.slem_scales,
        config.slem_models,
        generator=derive_seed(base_seed(generator), "slem"),
    )

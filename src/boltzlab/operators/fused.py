"""One pass for what is not the GEMM: probability, uniform and threshold in one compiled kernel.

A sweep of a layer is a matrix product followed by elementwise work: the operator's
probability (a sigmoid for Gibbs, an exponential for flip-the-state), a uniform per unit, a
comparison. Done as torch operations that is four to six passes over memory, and torch's CPU
generator draws its numbers on one thread; together they cost 40–60% on top of the GEMMs of a
784×500 sweep. Here the whole chain is one function of the logits, the current states and two
keys, compiled with ``torch.compile`` (TorchInductor generates one vectorised, OpenMP-parallel
C++ loop), with the uniforms from the counter-based :func:`boltzlab.rng.counter_bits`: unit
``i`` of a draw depends only on ``i`` and the draw's keys, so the uniforms are the same for any
number of threads, and two fresh keys from the caller's generator make each draw independent
(docs/performance.md).

The kernel computes exactly what the operator's ``threshold_`` defines (the same formulas,
written without in-place updates), compared with a centred uniform integer as in
:mod:`boltzlab.rng`, so it samples the same kernel as the unfused path, from a different
random stream. It is used on the CPU for float32/float64 layers of at least
``MIN_FUSED_UNITS`` units and ``MIN_FUSED_WIDTH`` units per chain (below that the compiled
call's fixed costs do not pay) when
``torch.compile`` works here; ``BOLTZLAB_FUSED=off`` turns it off, ``on`` uses it at any size
(the tests do, to check it against exact transition matrices). Accelerators keep the unfused
path. A failed compilation (no C++ compiler, say) turns it off for the process, once, with a
warning that names the cause; the attempt's generator draw is given back, so the run goes on
as one that never tried.
"""

from __future__ import annotations

import os
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.rng import counter_bits, counter_keys, uniform_scale

__all__ = ["ENVIRONMENT_VARIABLE", "MIN_FUSED_UNITS", "MIN_FUSED_WIDTH", "mode", "set_mode", "uses_fused"]

ENVIRONMENT_VARIABLE = "BOLTZLAB_FUSED"
#: Units (chains × layer width) from which the compiled kernel is used in ``auto`` mode: below
#: it the call's fixed cost (dynamo's wrapper and guards) outweighs what fusing saves. At 2^16
#: the 100 × 784 visible layer of 100-chain AIS was fused, and that AIS ran 8% slower than
#: unfused; a 784×500 sweep of 200 chains (156,800 visible units) takes 3.9 ms fused, 4.4 unfused ...
MIN_FUSED_UNITS = 1 << 17
#: ... for layers at least this wide. The first use in a process costs about 2.5 s (loading
#: torch.compile's machinery and the cached kernel), which a narrow layer (the demo's 64×16
#: RBM) never earns back; a 784-unit layer saves about 1 ns per unit and sweep.
MIN_FUSED_WIDTH = 256
# Counter indices must stay below 2^32 (counter_bits); larger layers use the unfused path.
_MAX_UNITS = 1 << 32

_mode: str | None = None  # set_mode's choice; None reads the environment
_compiled: dict[Any, Callable[..., Tensor]] = {}
_broken: str | None = None  # why compiling failed, once it has
_working: set[Any] = set()  # (operator, dtypes) whose kernel has compiled and run


def set_mode(name: str | None) -> None:
    """``"auto"``, ``"on"`` or ``"off"`` for the fused kernel from now on; ``None``: the environment."""
    global _mode
    if name is not None:
        _check_mode(name, "set_mode")
    _mode = name


def mode() -> str:
    """The mode in force: ``"auto"`` (default), ``"on"`` or ``"off"``."""
    name = _mode if _mode is not None else os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower()
    return _check_mode(name, ENVIRONMENT_VARIABLE)


def uses_fused(logits: Tensor) -> bool:
    """Whether a layer with these logits is sampled by the compiled kernel."""
    if _broken is not None or logits.device.type != "cpu":
        return False
    if logits.dtype not in (torch.float32, torch.float64) or logits.numel() >= _MAX_UNITS:
        return False
    chosen = mode()
    if chosen == "off":
        return False
    width = logits.shape[-1] if logits.dim() else 1
    return chosen == "on" or (logits.numel() >= MIN_FUSED_UNITS and width >= MIN_FUSED_WIDTH)


def fused_sample(
    operator: Any, logits: Tensor, current: Tensor, *, generator: torch.Generator
) -> Tensor | None:
    """New 0/1 values of one layer (``current``'s dtype), or ``None`` if the kernel is unavailable.

    ``operator`` must define ``threshold(logits, current)``: ``uniform_scale·(P(new = 1) − ½)``
    without in-place updates (what :meth:`~boltzlab.operators.base.LayerwiseOperator.threshold_`
    computes in place). Traced in-place updates are avoided on purpose: the mixture's
    kernel, traced through its in-place ``probability_on_`` on a clone, drew ``P(1)`` wrong on
    one thread with torch 2.13 (AIS's ``E[w]/Z`` was 1.31), and right on two.
    """
    global _broken
    # The generator's state is restored if the kernel cannot be built, so that a failed first
    # attempt leaves the same random stream as a run that never tried.
    variant = (type(operator), repr(operator), logits.dtype, current.dtype)
    # Saved only until this variant has run once: get_state copies the whole generator state.
    state = None if variant in _working else generator.get_state()
    keys = counter_keys(generator)
    kernel = _kernel(operator)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Flat inputs: only the length varies between calls, so each operator compiles
            # once per dtype (shape, stride and layout changes would each recompile).
            new = kernel(logits.reshape(-1), current.reshape(-1), keys).view(logits.shape)
    except Exception as error:
        if state is None:
            raise  # it compiled and ran before: this is a run-time error, not a missing compiler
        _broken = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
        generator.set_state(state)
        warnings.warn(
            f"the fused sampling kernel could not be compiled ({_broken}); sweeps use the unfused path "
            f"(set {ENVIRONMENT_VARIABLE}=off to skip the attempt)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    _working.add(variant)
    return new


def _check_mode(name: str, where: str) -> str:
    if name not in ("auto", "on", "off"):
        raise ValidationError(f"{where}: unknown fused-kernel mode {name!r}; choose auto, on or off")
    return name


def _kernel(operator: Any) -> Callable[..., Tensor]:
    """The compiled kernel of ``operator`` (one per operator type and parameters)."""
    key = (type(operator), repr(operator))
    kernel = _compiled.get(key)
    if kernel is None:
        threshold = operator.threshold

        def sample(logits: Tensor, current: Tensor, keys: Tensor) -> Tensor:
            scale = uniform_scale(current.dtype)
            index = torch.arange(logits.numel(), dtype=torch.int64, device=logits.device)
            bits = counter_bits(index, keys)
            if scale == 4294967296.0:  # float64: all 32 bits, centred
                uniform = bits.to(torch.float64) - 2147483648.0
            else:  # float32: the top 24 bits, centred, exact in float32
                uniform = (bits >> 8).to(torch.float32) - 8388608.0
            return (threshold(logits, current) > uniform).to(current.dtype)

        # A code object of its own per operator: torch.compile keeps its compiled variants
        # (and counts them against its recompile limit) per code object, and a closure shares
        # its code with every other closure of the same function.
        code = sample.__code__.replace(co_name=f"boltzlab_fused_{len(_compiled)}_{type(operator).__name__}")
        sample = types.FunctionType(code, sample.__globals__, code.co_name, None, sample.__closure__)
        kernel = torch.compile(sample, dynamic=True, fullgraph=True)
        _compiled[key] = kernel
    return kernel

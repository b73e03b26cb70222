"""Matrix products on the CPU through the faster of two BLAS libraries (docs/performance.md).

Every sweep, annealing step and gradient of an RBM or DBM is two or three matrix products
plus elementwise work, so the GEMM sets the pace. On the CPU torch calls its own BLAS (MKL
in the official wheels), numpy calls the OpenBLAS it bundles, and which one is faster depends
on the machine: on an AVX-512 AMD EPYC MKL ran at the AVX2 rate, half of OpenBLAS; on an
Intel Xeon the two were within 5%; on the AVX2 EPYC this was written on, OpenBLAS was 15%
faster. Both read and write the same memory, so the choice costs no copy: the ``openblas``
backend calls the CBLAS entry points of numpy's OpenBLAS on torch's storage
(:mod:`boltzlab.openblas`; a bias or an accumulation goes into BLAS's ``beta``, as torch's
``addmm`` does), and numpy's ``matmul`` (``Tensor.numpy()`` shares storage) where they cannot
be found.

The backend is ``"torch"`` or ``"openblas"``:

- ``BOLTZLAB_GEMM=torch|openblas|auto`` in the environment, or :func:`set_backend`, decides;
- ``auto`` (the default) times both on the two products of a 784×500 sweep of 512 chains
  (with a bias) the first time a product of that dtype is needed, keeps the faster (torch
  unless OpenBLAS wins by more than 3%), and does the same apart for products of fewer than
  :data:`SMALL_ROWS` rows (timed on 100 rows, the default batch of the estimators and of
  training); it caches each choice per machine, library versions and thread count in
  ``$XDG_CACHE_HOME/boltzlab/gemm.json`` (``~/.cache`` by default; ``BOLTZLAB_CACHE_DIR``
  overrides the folder);
- products on other devices, in other dtypes, or that autograd must see always use torch.

OpenBLAS's thread pool is kept at torch's thread count (with threadpoolctl), so the two
pools never ask for more cores than ``torch.set_num_threads`` allows. Results agree with
torch's up to float rounding; the exact-oracle tests run under both backends.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.openblas import OpenBLASKernels, gemm_into, openblas_kernels

__all__ = [
    "BACKENDS",
    "ENVIRONMENT_VARIABLE",
    "MIN_OPENBLAS_MACS",
    "SMALL_ROWS",
    "OpenBLASKernels",
    "addmm",
    "addmm_",
    "backend",
    "cache_path",
    "calibrate",
    "mm_into",
    "openblas_kernels",
    "set_backend",
    "single_threaded_openblas",
]

BACKENDS = ("torch", "openblas")
ENVIRONMENT_VARIABLE = "BOLTZLAB_GEMM"
# OpenBLAS must beat torch by this factor to be chosen: a tie keeps the library's default.
_MARGIN = 0.97
_CALIBRATION_SHAPE = (512, 784, 500)
#: Products of fewer rows than this are timed and chosen apart, on a 100-row product: the
#: default batch of AIS, RTS and training. At 100 rows torch's GEMM beat OpenBLAS's on the
#: AVX-512 EPYC where OpenBLAS won at 512 (docs/performance.md).
SMALL_ROWS = 256
_SMALL_CALIBRATION_ROWS = 100
#: Products of fewer multiply-adds (m·k·n) than this stay on torch: the OpenBLAS path's fixed
#: cost per call was larger than what OpenBLAS saves below about a million (measured through
#: numpy's matmul, before the CBLAS entry points: 100×64 by 64×16: torch 5.8 µs, OpenBLAS 11.0;
#: 100×784 by 784×20: 48.2 against 43.7).
MIN_OPENBLAS_MACS = 1 << 20

_requested: str | None = None  # set_backend's choice; None reads the environment
_chosen: dict[tuple[torch.dtype, int, bool], str] = {}  # per (dtype, threads, small), once resolved
_blas_threads: int | None = None
_limiter: object | None = None


def set_backend(name: str | None) -> None:
    """Use ``name`` (``"torch"``, ``"openblas"`` or ``"auto"``) for CPU products from now on.

    ``None`` goes back to the environment variable (``auto`` when unset).

    >>> from boltzlab import gemm
    >>> gemm.set_backend("torch"); gemm.backend(torch.float32)
    'torch'
    >>> gemm.set_backend(None)
    """
    global _requested
    if name is not None:
        _check_name(name, "set_backend")
    _requested = name
    _chosen.clear()


def backend(
    dtype: torch.dtype = torch.float32, rows: int | None = None, *, threads: int | None = None
) -> str:
    """The backend CPU products of ``dtype`` use now: ``"torch"`` or ``"openblas"``.

    ``rows``: the product's rows; fewer than :data:`SMALL_ROWS` get the choice calibrated on
    small products, ``None`` or more the one calibrated on large ones. ``threads``: the choice
    for products run on that many threads (torch's count by default); the one-region sweep asks
    for one, since each of its threads multiplies its own rows.
    """
    if dtype not in (torch.float32, torch.float64):
        return "torch"
    threads = torch.get_num_threads() if threads is None else threads
    small = rows is not None and rows < SMALL_ROWS
    key = (dtype, threads, small)
    chosen = _chosen.get(key)
    if chosen is None:
        requested = _requested_name()
        chosen = requested if requested != "auto" else _cached_or_calibrated(dtype, threads, small)
        _chosen[key] = chosen
    return chosen


def addmm(bias: Tensor | None, a: Tensor, b: Tensor, *, alpha: float = 1.0) -> Tensor:
    """``bias + alpha·(a @ b)`` as a new tensor; ``bias`` (shape ``(n,)``) is broadcast over rows.

    Shapes: ``a`` (m, k), ``b`` (k, n) → (m, n). Either may be a transposed view.
    """
    if not _numpy_path(a, b, bias):
        if bias is None:
            product = torch.mm(a, b)
            return product if alpha == 1.0 else product.mul_(alpha)
        return torch.addmm(bias, a, b, alpha=alpha)
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
    if bias is None:
        return _openblas_into(out, a, b, alpha=alpha, beta=0.0)
    return _openblas_into(out.copy_(bias), a, b, alpha=alpha, beta=1.0)


def addmm_(out: Tensor, a: Tensor, b: Tensor, *, alpha: float = 1.0) -> Tensor:
    """``out += alpha·(a @ b)`` in place; returns ``out``."""
    if not _numpy_path(a, b, out):
        return out.addmm_(a, b, alpha=alpha)
    return _openblas_into(out, a, b, alpha=alpha, beta=1.0)


def mm_into(out: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """Write ``a @ b`` into ``out`` (shape (m, n), contiguous) and return it."""
    if not _numpy_path(a, b, out):
        return torch.mm(a, b, out=out)
    return _openblas_into(out, a, b, alpha=1.0, beta=0.0)


def _openblas_into(out: Tensor, a: Tensor, b: Tensor, *, alpha: float, beta: float) -> Tensor:
    """``out = alpha·(a @ b) + beta·out`` (``beta`` 0 or 1) through OpenBLAS: its CBLAS entry
    point where it is found (one call, accumulating in place), else numpy's ``matmul``."""
    _sync_threads()
    a, b = a.detach(), b.detach()
    kernels = openblas_kernels()
    if kernels is not None and gemm_into(kernels, out, a, b, alpha=alpha, beta=beta):
        return out
    if beta == 0.0 and out.is_contiguous():
        np.matmul(a.numpy(), b.numpy(), out=out.detach().numpy())
        return out if alpha == 1.0 else out.mul_(alpha)
    product = torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    if beta == 0.0:  # overwrite, as torch.mm(out=) does: a NaN already in out must not survive
        return out.copy_(product) if alpha == 1.0 else out.copy_(product).mul_(alpha)
    return out.add_(product, alpha=alpha)


def calibrate(
    dtype: torch.dtype = torch.float32, *, repeats: int = 5, rows: int | None = None
) -> dict[str, float]:
    """GFLOP/s of each backend on the calibration products, at torch's current thread count.

    Each timing is the two products of an RBM sweep, ``a @ b`` and ``h @ bᵀ`` (a transposed
    view, as the visible layer's), each with a bias as :func:`addmm` runs it on each backend
    and *followed by a torch elementwise pass over its output*, as in
    a sweep: with two or more threads, OpenBLAS's worker threads keep spinning after a product
    while torch's OpenMP threads start the next operation, and on 2 cores that contention
    made OpenBLAS sweeps 2.5× slower than torch's although its product alone was as fast.
    ``rows`` replaces the calibration product's 512 rows. Returns ``{"torch": ..., "openblas": ...}``
    (best of ``repeats`` timings each).
    """
    m, k, n = _CALIBRATION_SHAPE
    m = m if rows is None else rows
    generator = torch.Generator().manual_seed(0)
    a = (torch.rand(m, k, generator=generator) < 0.3).to(dtype)
    b = torch.randn(k, n, generator=generator, dtype=dtype)
    h = (torch.rand(m, n, generator=generator) < 0.5).to(dtype)
    bias, bias_t = (
        torch.randn(n, generator=generator, dtype=dtype),
        torch.randn(k, generator=generator, dtype=dtype),
    )
    out, out_t = torch.empty(m, n, dtype=dtype), torch.empty(m, k, dtype=dtype)
    _sync_threads()

    def openblas() -> None:  # each backend's own path for a product with a bias, as addmm runs it
        _openblas_into(out.copy_(bias), a, b, alpha=1.0, beta=1.0).sigmoid_()
        _openblas_into(out_t.copy_(bias_t), h, b.t(), alpha=1.0, beta=1.0).sigmoid_()

    def torch_() -> None:
        torch.addmm(bias, a, b, out=out).sigmoid_()
        torch.addmm(bias_t, h, b.t(), out=out_t).sigmoid_()

    runs = {"torch": torch_, "openblas": openblas}
    best = {name: float("inf") for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():  # interleaved, so a noisy neighbour hits both alike
            started = time.perf_counter()
            run()
            run()
            best[name] = min(best[name], (time.perf_counter() - started) / 2)
    flops = 4.0 * m * k * n  # two products; the elementwise passes are counted as time, not as work
    return {name: flops / seconds / 1e9 for name, seconds in best.items()}


def cache_path() -> Path:
    """Where the calibration is cached: ``$BOLTZLAB_CACHE_DIR`` or ``$XDG_CACHE_HOME/boltzlab``."""
    folder = os.environ.get("BOLTZLAB_CACHE_DIR")
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = str(Path(base) / "boltzlab")
    return Path(folder) / "gemm.json"


# --------------------------------------------------------------------------- internals


def _requested_name() -> str:
    """``set_backend``'s choice, else ``BOLTZLAB_GEMM``, else ``"auto"``."""
    if _requested is not None:
        return _requested
    return _check_name(os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower(), ENVIRONMENT_VARIABLE)


def _check_name(name: str, where: str) -> str:
    if name not in (*BACKENDS, "auto"):
        raise ValidationError(f"{where}: unknown GEMM backend {name!r}; choose torch, openblas or auto")
    return name


def _numpy_path(a: Tensor, b: Tensor, other: Tensor | None) -> bool:
    """Whether this product goes through OpenBLAS: CPU, float32/64, one dtype, no autograd."""
    if a.device.type != "cpu" or b.device.type != "cpu" or a.dtype != b.dtype:
        return False
    if a.dtype not in (torch.float32, torch.float64) or a.dim() != 2 or b.dim() != 2:
        return False
    if other is not None and (other.dtype != a.dtype or other.device.type != "cpu"):
        return False
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return False
    requested = _requested_name()
    if requested != "auto":
        return requested == "openblas"  # a forced backend is used at every size
    # Small products stay on torch before anything is calibrated: a tiny model never pays
    # for the calibration's products.
    if a.shape[0] * a.shape[1] * b.shape[1] < MIN_OPENBLAS_MACS:
        return False
    return backend(a.dtype, rows=a.shape[0]) == "openblas"


def _sync_threads() -> None:
    """Keep OpenBLAS's pool at torch's thread count (threadpoolctl), so they never oversubscribe.

    The limit is process-wide: the caller's own numpy and scipy code then uses as many BLAS
    threads as torch does.
    """
    global _blas_threads, _limiter
    threads = torch.get_num_threads()
    if threads == _blas_threads:
        return
    from threadpoolctl import threadpool_limits

    _limiter = threadpool_limits(limits=threads, user_api="blas")
    _blas_threads = threads


@functools.cache
def _machine_key(dtype: torch.dtype, threads: int) -> str:
    """What the calibration depends on: CPU model, library versions, BLAS, dtype, threads."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    blas = "unknown"
    try:
        from threadpoolctl import threadpool_info

        blas = ",".join(
            f"{info.get('internal_api')}-{info.get('version')}-{info.get('architecture')}"
            for info in threadpool_info()
            if info.get("user_api") == "blas"
        )
    except Exception:  # threadpoolctl cannot read every BLAS; the key only gets coarser
        pass
    return f"v4|{cpu}|torch {torch.__version__}|numpy {np.__version__}|{blas}|{dtype}|{threads} threads"


def _cached_or_calibrated(dtype: torch.dtype, threads: int, small: bool = False) -> str:
    key = _machine_key(dtype, threads) + (f"|{_SMALL_CALIBRATION_ROWS} rows" if small else "")
    path = cache_path()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    entry = cached.get(key) if isinstance(cached, dict) else None
    if isinstance(entry, dict) and entry.get("backend") in BACKENDS:
        return str(entry["backend"])
    # A 100-row product takes some 80 µs: more repeats for the same confidence. Timed on the
    # thread count the choice is for, whatever torch's is now.
    with _torch_threads(threads):
        speeds = calibrate(dtype, rows=_SMALL_CALIBRATION_ROWS, repeats=25) if small else calibrate(dtype)
    chosen = "openblas" if speeds["torch"] < _MARGIN * speeds["openblas"] else "torch"
    cached = cached if isinstance(cached, dict) else {}
    cached[key] = {"backend": chosen, "gflops": speeds, "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
    _write_atomically(path, json.dumps(cached, indent=1, sort_keys=True) + "\n")
    return chosen


@contextlib.contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """torch (and, through :func:`_sync_threads`, OpenBLAS) on ``threads`` threads for the duration."""
    before = torch.get_num_threads()
    if threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
        _sync_threads()


def _write_atomically(path: Path, text: str) -> None:
    """Best effort: an unwritable cache folder only means calibrating again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
            handle.write(text)
            temporary = handle.name
        os.replace(temporary, path)
    except OSError:
        pass


@contextlib.contextmanager
def single_threaded_openblas(kernels: OpenBLASKernels) -> Iterator[None]:
    """OpenBLAS on one thread for the duration (each thread of a parallel region calls it on
    its own rows); then back at torch's thread count, where :func:`mm_into` keeps it.

    The setting is process-wide: Python threads sweeping at the same time may find OpenBLAS
    back at torch's count before their own region ends (more threads than cores, not wrong
    results)."""
    _sync_threads()
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    kernels.set_num_threads(1)
    try:
        yield
    finally:
        kernels.set_num_threads(threads)

"""One Gibbs sweep of a Potts RBM: boltzlab against the ``rbms`` package, timed in the same run.

A sweep of a Potts–Bernoulli RBM (``L`` sites of ``q`` states, ``J`` binary hidden units) is
the hidden layer drawn given the visible one (a GEMM of the one-hot layer, a sigmoid, a
Bernoulli draw per unit), then every site drawn given the hidden layer (a GEMM, a softmax
over each site's ``q`` logits, a categorical draw per site). This script times that sweep in
boltzlab (``bl.operators.get("gibbs").step`` on a :class:`~boltzlab.models.PottsRBM`) and in
``rbms`` (the ``PBRBM`` class of ``rbms.potts_bernoulli``: its public ``sample_hiddens`` then
``sample_visibles``; its ``sample_state(n_steps=1)`` would draw the hidden layer a second
time), for a 31×21-symbol model with 100 hidden units and a 53×21 one with 200, at 1,000 and
10,000 chains, on one thread and on all of them.

How the two are matched:

* **The same parameters.** The boltzlab model is built first (weights N(0, 0.1²) moved to the
  zero-sum gauge, fields N(0, 1), hidden biases N(0, 0.1²)); ``rbms`` gets copies of them in its
  layout: ``weight_matrix`` = ``model.potts_weights`` (L, q, J), ``vbias`` = ``model.fields``
  (L, q), ``hbias`` = ``model.hidden_bias`` (J,).
* **The same chains.** Both start from the same visible states (boltzlab keeps them one-hot,
  ``rbms`` as symbol indices: ``model.to_indices``) and the same number of chains, at β = 1.
* **float32, CPU, the same threads.** ``torch.set_num_threads(T)`` and, through threadpoolctl,
  T BLAS threads for both (boltzlab may multiply with numpy's OpenBLAS, ``boltzlab.gemm``).
* **Each library as it comes.** Each sweep runs through the library's public API with its
  own choices: boltzlab's GEMM backend and uniforms, ``rbms``'s TorchScript functions,
  ``torch.bernoulli`` and ``torch.multinomial``; the output each keeps (``rbms`` also returns
  the hidden and visible probabilities) is part of its cost.

Timing: after three warm-up sweeps of each (TorchScript's profiling executor optimises
``rbms``'s functions on their second call), ``--rounds`` rounds alternate the two libraries
(in one order in even rounds, reversed in odd ones), each a block of sweeps lasting about
0.25 s after a 0.05 s pause; the figure is the median per sweep, and the ratio is boltzlab's
median over ``rbms``'s in the same run. A third variant in the same rounds is boltzlab's sweep
without its two Potts kernels (``BOLTZLAB_CATEGORICAL=off BOLTZLAB_SPARSE_PRODUCT=off``: the
site draw by torch operations, softmax, running sums, comparisons, scatter, and the hidden
product by ``gemm.addmm``), the code before :mod:`boltzlab.operators.categorical` and
:mod:`boltzlab.sparse_product`; its column "kernels' speed-up" is its median over boltzlab's
(``--no-before`` leaves it out). The machine's load average is printed
before and after: on a shared machine the seconds move, the ratios much less.

Correctness alignment (not a timing): on a small model (5 sites × 4 states, 6 hidden units)
both samplers run ``--check-chains`` chains for ``--check-sweeps`` sweeps from the same
uniform start; their visible marginals (one per site and state) are compared with each other
and with the exact marginals by enumeration of the ``q^L`` sequences, in standard errors.

``rbms`` is not a dependency of boltzlab: it lives in the benchmark's own environment
(``make bench-env-rbms`` builds ``benchmarks/envs/rbms/.venv``; docs/performance.md, "Potts
sweeps against rbms"). Usage::

    make bench-env-rbms
    benchmarks/envs/rbms/.venv/bin/python benchmarks/potts_sweep.py --out benchmarks/results/potts_sweep.md

Not part of the test suite (tests/test_potts_sweep_bench.py runs a tiny case where the
environment exists).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl
from boltzlab import gemm, sparse_product
from boltzlab.models.categorical import all_categorical_states, one_hot_indices
from boltzlab.operators import categorical

ROOT = Path(__file__).resolve().parent.parent
#: (sites, states, hidden units) of the models timed by default.
SIZES = ((31, 21, 100), (53, 21, 200))
#: The small model of the alignment check.
CHECK_SIZE = (5, 4, 6)
WEIGHT_STD = 0.1


@dataclass(frozen=True)
class Timing:
    """Median seconds per sweep of both libraries (and of boltzlab without its Potts kernels)."""

    n_sites: int
    n_states: int
    n_hidden: int
    n_chains: int
    threads: int
    boltzlab: float
    rbms: float
    before: float | None
    rounds: int
    gemm_backend: str

    @property
    def ratio(self) -> float:
        return self.boltzlab / self.rbms

    @property
    def speed_up(self) -> float | None:
        """The Potts kernels' speed-up: boltzlab's sweep without them over its sweep with them."""
        return None if self.before is None else self.before / self.boltzlab


def rbms_version() -> str:
    try:
        return metadata.version("rbms")
    except metadata.PackageNotFoundError:
        return "not installed"


def make_model(n_sites: int, n_states: int, n_hidden: int, *, seed: int, weight_std: float = WEIGHT_STD):
    """A float32 Potts RBM with non-trivial conditionals, reproducible from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    model = bl.models.PottsRBM(n_sites, n_states, n_hidden, generator=generator, weight_std=weight_std)
    with torch.no_grad():
        model.visible_bias.copy_(torch.randn(model.n_visible, generator=generator))
        model.hidden_bias.copy_(weight_std * torch.randn(n_hidden, generator=generator))
        model.apply_gauge_()
    return model


def rbms_params(model: Any) -> Any:
    """``model``'s parameters as an ``rbms`` Potts–Bernoulli RBM (copies, rbms's layout)."""
    from rbms.potts_bernoulli.classes import PBRBM

    return PBRBM(
        weight_matrix=model.potts_weights.detach().clone(),
        vbias=model.fields.detach().clone(),
        hbias=model.hidden_bias.detach().clone(),
    )


def rbms_chains(params: Any, visible: torch.Tensor, model: Any) -> dict:
    """``rbms`` chains at the visible states of ``visible`` (one-hot rows), as its init_chains makes them."""
    return params.init_chains(visible.shape[0], start_v=model.to_indices(visible).to(torch.float32))


def sweepers(
    model: Any, n_chains: int, *, seed: int
) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None], dict]:
    """One sweep of each library as a function of no arguments, all from the same start.

    The third is boltzlab's sweep without its Potts kernels (the site draw by torch operations,
    the hidden product dense): boltzlab before operators/categorical.py and sparse_product.py.
    """
    generator = bl.rng.make_generator(seed)
    before_generator = bl.rng.make_generator(seed + 1)
    torch.manual_seed(seed)  # rbms draws from torch's global generator
    chains = model.init_chains(n_chains, generator=generator).with_beta(1.0)
    operator = bl.operators.get("gibbs")
    params = rbms_params(model)
    state = {"boltzlab": chains, "before": chains, "rbms": rbms_chains(params, chains.layers[0], model)}

    def boltzlab_sweep() -> None:
        state["boltzlab"], _ = operator.step(model, state["boltzlab"], generator=generator)

    def before_sweep() -> None:
        categorical.set_mode("off")
        sparse_product.set_mode("off")
        try:
            state["before"], _ = operator.step(model, state["before"], generator=before_generator)
        finally:
            categorical.set_mode(None)
            sparse_product.set_mode(None)

    def rbms_sweep() -> None:
        # Hidden given visible, then visible given hidden: one sweep (sample_state(1) draws
        # the hidden layer again after the visible one).
        params.sample_visibles(params.sample_hiddens(state["rbms"]))

    return boltzlab_sweep, rbms_sweep, before_sweep, state


def time_block(function: Callable[[], None], repeats: int) -> float:
    """Seconds per call of ``repeats`` calls, after a pause that lets thread pools go idle."""
    time.sleep(0.05)
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def measure(
    n_sites: int,
    n_states: int,
    n_hidden: int,
    n_chains: int,
    threads: int,
    *,
    rounds: int,
    seed: int = 0,
    before: bool = True,
) -> Timing:
    """Median seconds per sweep of both libraries (and of boltzlab before its Potts kernels), alternating."""
    torch.set_num_threads(threads)
    model = make_model(n_sites, n_states, n_hidden, seed=seed)
    boltzlab_sweep, rbms_sweep, before_sweep, _ = sweepers(model, n_chains, seed=seed)
    functions = {"boltzlab": boltzlab_sweep, "rbms": rbms_sweep}
    if before:
        functions["before"] = before_sweep
    repeats = {}
    for name, function in functions.items():
        for _ in range(2):  # warm-up: allocator, thread pools, GEMM calibration, TorchScript
            function()
        seconds = time_block(function, 1)
        repeats[name] = max(1, round(0.25 / max(seconds, 1e-6)))
    samples: dict[str, list[float]] = {name: [] for name in functions}
    order = list(functions)
    for round_index in range(rounds):
        for name in order if round_index % 2 == 0 else order[::-1]:
            samples[name].append(time_block(functions[name], repeats[name]))
    return Timing(
        n_sites=n_sites,
        n_states=n_states,
        n_hidden=n_hidden,
        n_chains=n_chains,
        threads=threads,
        boltzlab=statistics.median(samples["boltzlab"]),
        rbms=statistics.median(samples["rbms"]),
        before=statistics.median(samples["before"]) if before else None,
        rounds=rounds,
        gemm_backend=f"{gemm.backend(torch.float32)} (under {gemm.SMALL_ROWS} rows: "
        f"{gemm.backend(torch.float32, rows=1)})",
    )


# ---------------------------------------------------------------------------- alignment
def exact_marginals(model: Any) -> torch.Tensor:
    """``P(site i in state a)`` by enumeration of the ``q^L`` sequences; float64 ``(L·q,)``."""
    states = all_categorical_states(model.n_sites, model.n_states, dtype=torch.float64)
    log_f = -model.free_energy(states.to(model.dtype))
    p = torch.softmax(log_f, 0)
    return p @ states


def alignment(n_chains: int, n_sweeps: int, *, seed: int = 1, threads: int = 1) -> dict[str, float]:
    """Both samplers' visible marginals after ``n_sweeps`` sweeps on a small model, in standard errors.

    Returns the largest ``|z|`` over the ``L·q`` marginals of boltzlab against rbms, and of
    each against the exact marginals, with the number of cells and chains.
    """
    torch.set_num_threads(threads)
    model = make_model(*CHECK_SIZE, seed=seed, weight_std=0.6)
    boltzlab_sweep, rbms_sweep, _, state = sweepers(model, n_chains, seed=seed)
    for _ in range(n_sweeps):
        boltzlab_sweep()
        rbms_sweep()
    ours = state["boltzlab"].layers[0].to(torch.float64).mean(0)
    theirs = one_hot_indices(state["rbms"]["visible"].to(torch.int64), model.n_states, dtype=torch.float64)
    theirs = theirs.mean(0)
    exact = exact_marginals(model)
    variance = (exact * (1 - exact)).clamp_min(1e-12) / n_chains

    def worst(a: torch.Tensor, b: torch.Tensor, scale: float) -> float:
        return float(((a - b).abs() / (variance * scale).sqrt()).max())

    return {
        "cells": float(exact.numel()),
        "chains": float(n_chains),
        "sweeps": float(n_sweeps),
        "boltzlab_vs_rbms": worst(ours, theirs, 2.0),
        "boltzlab_vs_exact": worst(ours, exact, 1.0),
        "rbms_vs_exact": worst(theirs, exact, 1.0),
    }


# ---------------------------------------------------------------------------- report
def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def table(timings: list[Timing]) -> list[str]:
    """The markdown table of ``timings``: ms per sweep, chain-sweeps per second, ratio."""
    lines = [
        "| model (L×q, J) | chains | threads | boltzlab ms/sweep | rbms ms/sweep | boltzlab / rbms | "
        "boltzlab chain-sweeps/s | rbms chain-sweeps/s | boltzlab before ms/sweep | kernels' speed-up |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        before = "—" if t.before is None else f"{t.before * 1e3:.2f}"
        speed_up = "—" if t.speed_up is None else f"{t.speed_up:.2f}"
        lines.append(
            f"| {t.n_sites}×{t.n_states}, {t.n_hidden} | {t.n_chains:,} | {t.threads} | "
            f"{t.boltzlab * 1e3:.2f} | {t.rbms * 1e3:.2f} | **{t.ratio:.2f}** | "
            f"{t.n_chains / t.boltzlab:,.0f} | {t.n_chains / t.rbms:,.0f} | {before} | {speed_up} |"
        )
    return lines


def report(
    timings: list[Timing],
    check: dict[str, float] | None,
    *,
    command: str,
    load_before: tuple[float, ...],
    load_after: tuple[float, ...],
) -> str:
    """The whole markdown report: set-up, the table, the alignment check."""
    loads = " / ".join(f"{value:.2f}" for value in load_before)
    loads_after = " / ".join(f"{value:.2f}" for value in load_after)
    backends = sorted({f"{t.threads} thread(s): {t.gemm_backend}" for t in timings})
    rounds = timings[0].rounds if timings else 0
    lines = [
        "# One Gibbs sweep of a Potts RBM: boltzlab against rbms",
        "",
        f"Made by `{command}` on {datetime.date.today().isoformat()}: {_cpu()}, {os.cpu_count()} CPUs, "
        f"{platform.platform()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"rbms {rbms_version()}, boltzlab at {_commit()}. float32; boltzlab's GEMM backend: "
        f"{'; '.join(backends)}. Median of {rounds} alternating rounds per row after warm-up; "
        f"load average (1, 5, 15 min) {loads} before and {loads_after} after: the machine was "
        "shared, so the seconds are noisy and the ratios (same run, interleaved) are the figures "
        "to read.",
        "",
        *table(timings),
        "",
    ]
    if check is not None:
        lines += [
            f"Alignment (a check, not a timing): a {CHECK_SIZE[0]}×{CHECK_SIZE[1]}, {CHECK_SIZE[2]}-hidden "
            f"model, {int(check['chains']):,} chains of each library after {int(check['sweeps'])} sweeps "
            f"from the same start. Largest |z| over the {int(check['cells'])} visible marginals: "
            f"boltzlab against rbms {check['boltzlab_vs_rbms']:.2f}, boltzlab against the exact "
            f"marginals {check['boltzlab_vs_exact']:.2f}, rbms against them {check['rbms_vs_exact']:.2f} "
            f"({verdict(check)}).",
            "",
        ]
    return "\n".join(lines)


def verdict(check: dict[str, float]) -> str:
    """``"agree"`` when every |z| is below a Bonferroni level for the cells compared, else what differs."""
    # Two-sided false-alarm probability 1e-3 over all cells of the three comparisons.
    level = _normal_quantile(1 - 1e-3 / (2 * 3 * check["cells"]))
    keys = ("boltzlab_vs_rbms", "boltzlab_vs_exact", "rbms_vs_exact")
    failed = [key.replace("_", " ") for key in keys if check[key] > level]
    return (
        f"agree: all below {level:.2f}" if not failed else f"DISAGREE above {level:.2f}: {', '.join(failed)}"
    )


def _normal_quantile(p: float) -> float:
    """The standard normal quantile by bisection on ``erfc`` (no scipy needed)."""
    low, high = 0.0, 10.0
    for _ in range(100):
        middle = (low + high) / 2
        if 0.5 * math.erfc(middle / math.sqrt(2)) > 1 - p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def main(argv: list[str] | None = None) -> tuple[list[Timing], dict[str, float] | None]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=[f"{L}x{q}x{J}" for L, q, J in SIZES],
        help="Models as LxqxJ (sites × states × hidden units); default 31x21x100 53x21x200.",
    )
    parser.add_argument("--chains", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=sorted({1, os.cpu_count() or 1}),
        help="Thread counts (default: 1 and all the CPUs).",
    )
    parser.add_argument("--rounds", type=int, default=7, help="Counted rounds per row (default 7).")
    parser.add_argument("--check-chains", type=int, default=20000)
    parser.add_argument("--check-sweeps", type=int, default=30)
    parser.add_argument("--no-check", action="store_true", help="Skip the alignment check.")
    parser.add_argument(
        "--no-before",
        action="store_true",
        help="Skip boltzlab's sweep without its Potts kernels (the code before them).",
    )
    parser.add_argument("--out", type=Path, help="Also write the markdown report to this file.")
    arguments = parser.parse_args(argv)
    try:
        import rbms  # noqa: F401
    except ImportError:
        raise SystemExit(
            "this benchmark needs the rbms package, which lives in the benchmark's own environment: "
            "run `make bench-env-rbms`, then benchmarks/envs/rbms/.venv/bin/python benchmarks/potts_sweep.py"
        ) from None
    from threadpoolctl import threadpool_limits

    sizes = [tuple(int(part) for part in size.lower().split("x")) for size in arguments.sizes]
    command = "python benchmarks/potts_sweep.py" + (
        " " + " ".join(sys.argv[1:] if argv is None else argv) if (argv or sys.argv[1:]) else ""
    )
    load_before = os.getloadavg()
    print(
        f"torch {torch.__version__}, rbms {rbms_version()}, {_cpu()}; load average "
        f"{' / '.join(f'{value:.2f}' for value in load_before)}"
    )
    print(
        f"{'model':>12} {'chains':>7} {'threads':>7} {'boltzlab ms':>11} {'rbms ms':>9} {'ratio':>6} "
        f"{'before ms':>10} {'speed-up':>8}",
        flush=True,
    )
    timings = []
    for threads in arguments.threads:
        with threadpool_limits(limits=threads, user_api="blas"):
            for n_sites, n_states, n_hidden in sizes:
                for n_chains in arguments.chains:
                    timing = measure(
                        n_sites,
                        n_states,
                        n_hidden,
                        n_chains,
                        threads,
                        rounds=arguments.rounds,
                        before=not arguments.no_before,
                    )
                    timings.append(timing)
                    before = "—" if timing.before is None else f"{timing.before * 1e3:.2f}"
                    speed_up = "—" if timing.speed_up is None else f"{timing.speed_up:.2f}"
                    print(
                        f"{f'{n_sites}x{n_states},{n_hidden}':>12} {n_chains:>7} {threads:>7} "
                        f"{timing.boltzlab * 1e3:>11.2f} {timing.rbms * 1e3:>9.2f} {timing.ratio:>6.2f} "
                        f"{before:>10} {speed_up:>8}",
                        flush=True,
                    )
    check = None
    if not arguments.no_check:
        with threadpool_limits(limits=1, user_api="blas"):
            check = alignment(arguments.check_chains, arguments.check_sweeps)
        print(
            f"alignment: max |z| boltzlab vs rbms {check['boltzlab_vs_rbms']:.2f}, vs exact "
            f"{check['boltzlab_vs_exact']:.2f} (boltzlab) and {check['rbms_vs_exact']:.2f} (rbms): {verdict(check)}"
        )
    text = report(timings, check, command=command, load_before=load_before, load_after=os.getloadavg())
    if arguments.out is not None:
        arguments.out.write_text(text, encoding="utf-8")
        print(f"wrote {arguments.out}")
    return timings, check


if __name__ == "__main__":
    main()

"""Accuracy of the log Z estimators at matched cost: the three benchmarks of issue 4 in one go.

A thin wrapper over ``boltzlab reproduce rts-vs-ais | estimators-vs-k | varopt`` (the
commands and computations are :mod:`boltzlab_experiments.accuracy`, installed from
``experiments/`` by ``make install``), sharing one cache of trained 784×20 RBMs:

* ``rts-vs-ais`` — Carlson et al. (2016), Fig. 3: bias and RMSE of RTS (K = 100), AIS and
  RAISE against Gibbs sweeps per chain, 100 chains, against the exact log Z;
* ``estimators-vs-k`` — the same paper's Fig. 4: RMSE of RTS, TS, TI, TI-RB and MBAR against K;
* ``varopt`` — Kiwaki (2015), Table 1: log Ẑ and ESS of LINEAR, SM08, GMS13, VAROPT and
  decelerated VAROPT (δ = 0.003, 0.006, 0.009) on CD-1, CD-25 and PCD RBMs.

Usage::

    python benchmarks/accuracy.py --out runs/accuracy                  # scaled: each ≲ 10 min, 1 thread
    python benchmarks/accuracy.py --out runs/accuracy varopt --full     # one benchmark, closer to the paper
    python benchmarks/accuracy.py --tiny --dataset digits              # seconds; checks the pipeline

Each benchmark writes CSV and markdown tables, a PNG and ``summary.md`` (with the verdict on
the paper's claim) to ``OUT/<name>/``; the trained models are cached in ``OUT/models``. Not
part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from boltzlab.cli.main import main as boltzlab_main

BENCHMARKS = ("rts-vs-ais", "estimators-vs-k", "varopt")


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"Benchmarks, any of {', '.join(BENCHMARKS)} (default all)."
    )
    parser.add_argument("--out", type=Path, default=Path("runs/accuracy"), help="Output root directory.")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="Closer to the papers (slow).")
    size.add_argument("--tiny", action="store_true", help="Toy sizes, to check the pipeline.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default="mnist", help="Dataset name or path (default mnist).")
    parser.add_argument("--data-root", type=Path, help="Where the datasets are (else BOLTZLAB_DATA).")
    parser.add_argument("--threads", type=int, help="torch threads (default: 1 unless --full).")
    arguments = parser.parse_args(argv)
    unknown = [name for name in arguments.names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    return arguments


def run(arguments: argparse.Namespace) -> int:
    """Run each chosen benchmark through the command line; the first failure's exit status."""
    for name in arguments.names or BENCHMARKS:
        command = [] if arguments.threads is None else ["--threads", str(arguments.threads)]
        command += [
            "reproduce",
            name,
            "--out",
            str(arguments.out / name),
            "--model-dir",
            str(arguments.out / "models"),
        ]
        command += ["--seed", str(arguments.seed), "--dataset", arguments.dataset]
        command += ["--full"] if arguments.full else ["--tiny"] if arguments.tiny else []
        command += [] if arguments.data_root is None else ["--data-root", str(arguments.data_root)]
        started = time.perf_counter()
        try:
            boltzlab_main(command)
        except SystemExit as exit_:
            if exit_.code:
                return int(exit_.code) if isinstance(exit_.code, int) else 1
        print(f"{name}: {time.perf_counter() - started:.1f} s wall", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(run(parse_arguments(sys.argv[1:])))

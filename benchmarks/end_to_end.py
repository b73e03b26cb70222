"""End to end, before and after the CPU speed work: AIS, a PCD epoch and ``make demo``'s job.

"Before" is boltzlab with torch's GEMM and the unfused elementwise path
(``BOLTZLAB_GEMM=torch BOLTZLAB_FUSED=off``, exactly the code path of the release before
``boltzlab.gemm`` and ``boltzlab.operators.fused`` existed); "after" is the defaults (the
calibrated GEMM backend, the fused kernel). Each workload runs in a fresh process per
setting, the settings alternate (before, after, before, after, ...) so that a noisy machine
hits both alike, and the figure is the median wall time of each and their ratio:

* ``ais``: ``bl.estimate_log_z(model, method="ais", n_chains=100, n_temperatures=10_000)`` on a
  784×500 RBM (the MNIST PCD model of ``benchmarks/reference_784x500.py`` when it is cached
  in ``runs/``, else random weights with an MNIST-like base), verdict witness off;
* ``pcd``: one epoch of PCD-1 on MNIST (60,000 images, batch 100, 500 hidden units; random
  binary data of that shape when MNIST is not on the machine);
* ``demo``: ``boltzlab demo`` (what ``make demo`` runs after installing).

The compiled kernel is built before the timer starts (and cached on disk by torch), so the
figures are steady-state. Not part of the test suite.

Usage::

    python benchmarks/end_to_end.py [--workloads ais pcd demo] [--repeats 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {
    "before": {"BOLTZLAB_GEMM": "torch", "BOLTZLAB_FUSED": "off"},
    "after": {"BOLTZLAB_GEMM": "auto", "BOLTZLAB_FUSED": "auto"},
}

_WORKER = r"""
import json, sys, time, torch
import boltzlab as bl
from pathlib import Path
workload, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
generator = torch.Generator().manual_seed(0)
try:
    data = bl.data.load("mnist").train
except Exception:
    data = (torch.rand(60000, 784, generator=generator) < 0.13).float()
if workload == "ais":
    cached = Path("runs/mnist-500-pcd/model.safetensors")
    if cached.is_file():
        model = bl.RBM.load(cached)
    else:
        model = bl.RBM(784, 500, generator=0, weight_std=0.05)
        model.set_base_rate(data[:10000])
    # Warm-up: the GEMM calibration and the compiled kernel, outside the timer.
    bl.estimate_log_z(model, method="ais", n_chains=100, n_temperatures=50, generator=1, lower_bound_sweeps=0)
    started = time.perf_counter()
    estimate = bl.estimate_log_z(model, method="ais", n_chains=100, n_temperatures=10_000, generator=2,
                                 lower_bound_sweeps=0)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "log_z": estimate.log_z}))
else:
    model = bl.RBM(784, 500, generator=0)
    bl.train(model, data[:1000], algorithm="pcd", k=1, n_updates=5, batch_size=100, generator=1)
    started = time.perf_counter()
    bl.train(model, data, algorithm="pcd", k=1, n_epochs=1, batch_size=100, generator=2)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds}))
"""


def run_once(workload: str, setting: str, threads: int) -> float:
    """Wall seconds of one workload in a fresh process with ``setting``'s environment."""
    environment = {**os.environ, **SETTINGS[setting], "OMP_NUM_THREADS": str(threads)}
    if workload == "demo":
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            subprocess.run(
                [str(Path(sys.executable).parent / "boltzlab"), "demo", "--out", str(Path(folder) / "demo")],
                cwd=ROOT,
                env=environment,
                check=True,
                capture_output=True,
            )
            return time.perf_counter() - started
    completed = subprocess.run(
        [sys.executable, "-c", _WORKER, workload, str(threads)],
        cwd=ROOT,
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(completed.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--workloads", nargs="+", default=["ais", "pcd", "demo"], choices=["ais", "pcd", "demo"]
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.threads} thread(s); median of {args.repeats} alternating runs per setting")
    print(f"{'workload':>8} {'before s':>9} {'after s':>8} {'before/after':>12}")
    for workload in args.workloads:
        times: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for _ in range(args.repeats):
            for setting in SETTINGS:
                times[setting].append(run_once(workload, setting, args.threads))
        before, after = statistics.median(times["before"]), statistics.median(times["after"])
        print(f"{workload:>8} {before:>9.1f} {after:>8.1f} {before / after:>12.2f}", flush=True)


if __name__ == "__main__":
    main()

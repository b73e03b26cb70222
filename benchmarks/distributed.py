"""Scaling out on one machine: the same job on 1 process and on N processes (torch.distributed, gloo).

Workloads (docs/architecture.md, "Scaling out"):

* ``ais``: ``estimate_log_z(method="ais")`` on a 784×200 RBM (random weights of MNIST-like
  scale, an MNIST-like base), 400 chains × 1,500 temperatures, linear schedule;
* ``pcd``: one epoch of data-parallel PCD-1 on MNIST-shaped data (60,000 × 784, batch 100,
  100 chains, 200 hidden units; MNIST itself when ``BOLTZLAB_DATA`` has it);
* ``rts``: ``estimate_log_z(method="rts")`` with 100 chains and 2,000 long-run sweeps on the
  same 784×200 model (its pilot, initial iterations and budget rounds included);
* ``pt``: ``bl.sample(sampler="pt")`` on the same model, 256 systems × 10 levels × 200 sweeps,
  samples kept every 10 sweeps (the systems split over the processes);
* ``st``: ``bl.sample(sampler="st")``, 200 chains × 1,000 sweeps, its adaptation included.

Every estimate includes its verdict's certified-lower-bound witness (1,000 chains × 200 sweeps,
sharded too). For ``pcd`` the time is the training updates only (from the first update to
the last, measured by a callback); checking and base-fitting the 60,000 examples happen on
every process and are printed separately as ``setup``.

"1 process" is a plain run with no process group (what a user runs without torchrun), with one
thread; "N processes" are started as torchrun starts them (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``/``PORT``), one thread each. The time is the job's wall time inside the workers
(process start and imports excluded; the slowest rank counts). Settings alternate over repeats so
that a noisy machine hits both alike; the figure is the median and the ratio of medians.
Not part of the test suite.

Usage::

    python benchmarks/distributed.py [--workloads ais pcd rts pt st] [--processes 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_WORKER = r"""
import json, os, sys, time, torch
import boltzlab as bl
from boltzlab import distributed
workload, out = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
here = distributed.init_from_environment()
model = bl.RBM(n_visible=784, n_hidden=200, generator=0)
with torch.no_grad():
    model.weights.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(1))
pixels = torch.rand(784, generator=torch.Generator().manual_seed(2)) ** 3
data = (torch.rand(2000, 784, generator=torch.Generator().manual_seed(3)) < pixels).float()
model.set_base_rate(data)
if workload == "pcd":
    try:
        data = bl.data.load("mnist").train
    except Exception:
        data = (torch.rand(60000, 784, generator=torch.Generator().manual_seed(3)) < pixels).float()
class Clock(bl.training.Callback):
    def on_train_begin(self, run):
        self.begin = time.perf_counter()
    def on_train_end(self, run):
        self.end = time.perf_counter()
if here.active:
    torch.distributed.barrier()
start = time.perf_counter()
setup = 0.0
if workload == "ais":
    result = bl.estimate_log_z(model, method="ais", n_chains=400, n_temperatures=1500, schedule="linear", generator=0)
    value = result.log_z
elif workload == "rts":
    result = bl.estimate_log_z(model, method="rts", n_chains=100, n_sweeps=2000, generator=0)
    value = result.log_z
elif workload in ("pt", "st"):
    chains, sweeps = (256, 200) if workload == "pt" else (200, 1000)
    result = bl.sample(model, sampler=workload, n_chains=chains, n_sweeps=sweeps, keep_every=10, generator=0)
    value = float(result.samples.mean())
else:
    clock = Clock()
    bl.train(model, data, algorithm="pcd", batch_size=100, n_chains=100, n_epochs=1, learning_rate=0.01,
             generator=0, snapshots=None, callbacks=[clock])
    value = float(model.weights.detach().abs().mean())
    setup = clock.begin - start
    start = clock.begin
seconds = (clock.end if workload == "pcd" else time.perf_counter()) - start
if here.active:
    seconds = max(distributed.all_gather(seconds))
    setup = max(distributed.all_gather(setup))
if here.is_main:
    with open(out, "w") as handle:
        json.dump({"seconds": seconds, "setup": setup, "value": value, "world_size": here.world_size}, handle)
distributed.finish()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(workload: str, processes: int) -> dict:
    """One run of ``workload`` on ``processes`` processes (1: no process group)."""
    with tempfile.TemporaryDirectory() as folder:
        script, out = Path(folder) / "worker.py", Path(folder) / "out.json"
        script.write_text(_WORKER)
        port = _free_port()
        base = {**os.environ, "OMP_NUM_THREADS": "1"}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            base.pop(name, None)
        envs = (
            [base]
            if processes == 1
            else [
                {
                    **base,
                    "RANK": str(rank),
                    "LOCAL_RANK": str(rank),
                    "WORLD_SIZE": str(processes),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                }
                for rank in range(processes)
            ]
        )
        workers = [
            subprocess.Popen([sys.executable, str(script), workload, str(out)], env=env) for env in envs
        ]
        codes = [worker.wait(timeout=3600) for worker in workers]
        if any(codes):
            raise SystemExit(f"{workload} on {processes} processes failed: exit codes {codes}")
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=["ais", "pcd", "rts", "pt", "st"],
        choices=["ais", "pcd", "rts", "pt", "st"],
    )
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}; 1 thread per process; {args.repeats} repeats, alternating")
    print(
        f"{'workload':<9} {'1 process (s)':>14} {f'{args.processes} processes (s)':>16} {'speed-up':>9}   values"
    )
    for workload in args.workloads:
        times: dict[int, list[float]] = {1: [], args.processes: []}
        values: dict[int, list[float]] = {1: [], args.processes: []}
        setups: dict[int, list[float]] = {1: [], args.processes: []}
        for _ in range(args.repeats):
            for processes in (1, args.processes):
                outcome = run(workload, processes)
                times[processes].append(outcome["seconds"])
                values[processes].append(outcome["value"])
                setups[processes].append(outcome["setup"])
        one, many = statistics.median(times[1]), statistics.median(times[args.processes])
        print(
            f"{workload:<9} {one:>14.2f} {many:>16.2f} {one / many:>8.2f}x   "
            f"1: {values[1][0]:.4f}, {args.processes}: {values[args.processes][0]:.4f}"
            + (
                f"; setup {statistics.median(setups[1]):.2f} s / {statistics.median(setups[args.processes]):.2f} s"
                if workload == "pcd"
                else ""
            )
        )


if __name__ == "__main__":
    main()

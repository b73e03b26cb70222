"""A sharp model the project trains itself, and log Z's verdict on it with and without data.

Trains a 784×20 RBM on binarised Fashion-MNIST with PCD-1 at a constant learning rate of 0.05
for 20,000 updates (the recipe that leaves a mode only the data reach; docs/trust.md, "Three
verdicts"), computes its exact log Z (2^20 hidden states), and runs the two calls of
docs/trust.md with the library's defaults:

    bl.estimate_log_z(model, "ais", generator=3)                          # no data
    bl.estimate_log_z(model, "ais", generator=3, check_data=train[:20000])

printing each one's error against the exact value, its standard error, z, verdict and time.
``--no-witness`` drops the rows the model keeps first (a model saved before witness rows
existed, or with ``clear_witness()``), so the first call shows what an estimate with nothing
to start the witness from says. The model of ``tests/fixtures/sharp_fashion_784x20.safetensors``
was made by this script (``--out``); training is chaotic at this learning rate, so another
machine's BLAS may give another model from the same seed.

Usage::

    python benchmarks/sharp_model.py --out runs/sharp.safetensors         # train, then the calls
    python benchmarks/sharp_model.py --model tests/fixtures/sharp_fashion_784x20.safetensors
    python benchmarks/sharp_model.py --model ... --no-witness --fast      # 100 chains, 1,000 temperatures

Needs Fashion-MNIST (``apt-get install dataset-fashion-mnist``, or ``BOLTZLAB_DATA``; see
docs/data.md). Not part of the test suite (tests/estimators/test_sharp_model.py uses the fixture).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import boltzlab as bl

RECIPE = {"algorithm": "pcd", "learning_rate": 0.05, "n_updates": 20_000, "generator": 1, "snapshots": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="Score this model file instead of training one.")
    parser.add_argument("--out", type=Path, help="Where to save the trained model.")
    parser.add_argument("--no-witness", action="store_true", help="Drop the model's witness rows first.")
    parser.add_argument("--fast", action="store_true", help="AIS at 100 chains × 1,000 temperatures.")
    parser.add_argument("--threads", type=int, default=1)
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)

    train = bl.data.load("fashion-mnist").train
    if arguments.model is not None:
        model = bl.RBM.load(arguments.model)
    else:
        model = bl.RBM(train.shape[1], 20, generator=RECIPE["generator"])
        started = time.perf_counter()
        bl.train(model, train, **RECIPE)
        print(f"trained {RECIPE} in {time.perf_counter() - started:.0f} s", flush=True)
        if arguments.out is not None:
            model.save(arguments.out, metadata={"made_by": "python benchmarks/sharp_model.py"})
            print(f"wrote {arguments.out}")
    if arguments.no_witness and hasattr(model, "clear_witness"):
        model.clear_witness()
    exact = bl.exact_log_z(model)
    print(f"exact log Z {exact:.4f}", flush=True)
    budget = {"n_chains": 100, "n_temperatures": 1000} if arguments.fast else {}
    no_data = "no check_data" + (
        ", no witness rows" if arguments.no_witness else ", the model's witness rows"
    )
    for label, options in ((no_data, {}), ("check_data=train[:20000]", {"check_data": train[:20_000]})):
        started = time.perf_counter()
        estimate = bl.estimate_log_z(model, "ais", generator=3, **budget, **options)
        seconds = time.perf_counter() - started
        # getattr: the same script scores builds from before the third verdict.
        status = getattr(estimate, "status", "reliable" if estimate.reliable else "unreliable")
        reason = estimate.warnings[0] if estimate.warnings else ""
        print(
            f"{label}: error {estimate.log_z - exact:+.3f} ± {estimate.stderr:.3f} (z {estimate.z_score(exact):+.0f}), "
            f"reliable={estimate.reliable}, verdict {status}, {estimate.info.n_chains} chains, {seconds:.0f} s; "
            f"first reason: {reason}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Hard Potts models: every log Z estimator's defaults on Potts RBMs whose log Z is known exactly.

The sequence counterpart of ``benchmarks/hard_models.py``: Potts RBMs (21 symbols per site,
at most 20 hidden units, so ``bl.exact_log_z`` enumerates the hidden states with every site
summed out in closed form) trained with CD-1 and with constant-rate PCD on the three
alignments of ``../shared/data/proteins`` (WW domain, Kunitz domain, lattice proteins), then
every estimator that applies to a Potts RBM run with its *default* settings and compared with
the exact value, scored by the same rules (confident miss, coverage, crying wolf;
``hard_models_report.py``). The verdict's witness starts from the rows each model keeps
(training fits the profile base to the training sequences and keeps 1,000 of them), as
``estimate_log_z`` does without ``check_data``; ``--check-data`` starts it from the training
alignment, as ``boltzlab evaluate --data`` does.

Usage::

    python benchmarks/hard_potts.py                          # six models (~30–60 min, 1 thread)
    python benchmarks/hard_potts.py --preset tiny            # seconds; checks the pipeline
    python benchmarks/hard_potts.py --methods ais rts --families ww

Writes ``hard_potts.csv``, ``hard_potts_diagnostics.csv`` and ``hard_potts.md`` to ``--out``
(default ``benchmarks/results``); models are cached in ``--cache`` (default
``runs/hard-potts``). Skips with a line saying why when the alignments are not found.
Not part of the test suite (``tests/test_hard_potts_bench.py`` runs the tiny preset).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import boltzlab as bl
from boltzlab.data.locate import ENVIRONMENT_VARIABLE
from boltzlab.data.sequences import read_fasta
from boltzlab.models import PottsRBM

# The companions sit beside this script, and benchmarks/ is not a package.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hard_models import (
    ALGORITHMS,
    Preset,
    _generator,
    _stable_seed,
    add_scoring_arguments,
    method_extras,
    method_options,
    resolve_methods,
    score_model,
    train_cached,
    training_config,
    training_options,
)
from hard_models_report import COLUMNS, report, write_csv

ROOT = Path(__file__).resolve().parent.parent
#: Every estimator that applies to a Potts RBM (anchored AIS and the trajectory routes are the
#: binary RBM's).
POTTS_METHODS = ("exact", "ais", "raise", "rts", "ts", "ti", "ti-rb", "mbar")
FAMILIES = {
    "ww": "WW_domain_MSA.fasta",
    "kunitz": "Kunitz_domain_MSA.fasta",
    "lattice": "Lattice_Proteins_MSA.fasta",
}
HELD_OUT_FRACTION = 0.1


@dataclass(frozen=True)
class PottsPreset:
    """Which families and algorithms, how long they train, hidden units, estimator budgets."""

    families: tuple[str, ...]
    algorithms: tuple[str, ...]
    n_updates: dict[str, int]
    n_hidden: int
    max_sequences: int | None
    raise_examples: int
    method_options: dict[str, dict[str, Any]]


_TEMPERED_TINY = {"n_chains": 20, "n_temperatures": 20, "n_sweeps": 100, "initial_sweeps": 10}
PRESETS = {
    "tiny": PottsPreset(
        families=("ww",),
        algorithms=("cd1", "pcd-const"),
        n_updates=dict.fromkeys(ALGORITHMS, 100),
        n_hidden=4,
        max_sequences=2000,
        raise_examples=3,
        method_options={
            "ais": {"n_chains": 16, "n_temperatures": 200},
            "raise": {"n_chains": 2, "n_temperatures": 100},
            **{method: dict(_TEMPERED_TINY) for method in ("rts", "ts", "ti", "ti-rb", "mbar")},
        },
    ),
    "default": PottsPreset(
        families=tuple(FAMILIES),
        algorithms=("cd1", "pcd-const"),
        n_updates={"cd1": 3000, "cd25": 1000, "pcd-decay": 5000, "pcd-const": 5000},
        n_hidden=20,
        max_sequences=None,
        raise_examples=20,
        method_options={},
    ),
}


def data_directory(root: Path | None) -> Path:
    """``../shared/data/proteins`` beside the repository, or under ``BOLTZLAB_DATA`` / ``root``."""
    candidates = [] if root is None else [root / "proteins", root]
    if os.environ.get(ENVIRONMENT_VARIABLE):
        candidates.append(Path(os.environ[ENVIRONMENT_VARIABLE]) / "proteins")
    candidates.append(ROOT.parent / "shared" / "data" / "proteins")
    for candidate in candidates:
        if (candidate / FAMILIES["ww"]).is_file():
            return candidate
    raise FileNotFoundError(f"no protein alignments in {', '.join(map(str, candidates))}")


def load_family(
    name: str, *, root: Path | None, seed: int, max_sequences: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, held_out)`` symbol indices of one alignment: a random 10 % held out."""
    alignment = read_fasta(data_directory(root) / FAMILIES[name], alphabet="protein")
    sequences = alignment.sequences
    order = torch.randperm(sequences.shape[0], generator=_generator(_stable_seed("split", name, seed)))
    if max_sequences is not None:
        order = order[:max_sequences]
    n_held = max(1, round(HELD_OUT_FRACTION * order.numel()))
    return sequences[order[n_held:]], sequences[order[:n_held]]


def obtain_model(
    cache: Path,
    family: str,
    train: torch.Tensor,
    held_out: torch.Tensor,
    algorithm: str,
    *,
    n_hidden: int,
    n_updates: int,
    seed: int,
    retrain: bool = False,
) -> tuple[PottsRBM, dict[str, Any], Path]:
    """The cached model of this configuration, or train it: ``(model, sidecar, directory)``."""
    config = {
        **training_config(
            family, algorithm, n_updates=n_updates, n_visible=train.shape[1], n_hidden=n_hidden, seed=seed
        ),
        "n_train": train.shape[0],
    }
    name = f"{family}-{algorithm}-h{n_hidden}-u{n_updates}-s{seed}"
    return train_cached(
        cache / name,
        config,
        build=lambda: PottsRBM(
            n_sites=train.shape[1], n_hidden=n_hidden, alphabet="protein", generator=_generator(seed)
        ),
        load=PottsRBM.load,
        train=train,
        held_out=held_out,
        train_options=training_options(algorithm, n_updates=n_updates, seed=seed),
        retrain=retrain,
    )


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=tuple(PRESETS), default="default")
    parser.add_argument(
        "--families", nargs="+", choices=tuple(FAMILIES), help="Override the preset's alignments."
    )
    parser.add_argument("--algorithms", nargs="+", choices=tuple(ALGORITHMS), help="Override its algorithms.")
    parser.add_argument("--n-updates", type=int, help="Training updates for every algorithm.")
    parser.add_argument("--n-hidden", type=int, help="Hidden units of every model (<= 20).")
    parser.add_argument(
        "--check-data", action="store_true", help="Start the witness from the training alignment."
    )
    add_scoring_arguments(parser, cache=ROOT / "runs" / "hard-potts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark; returns the result rows (also written to ``--out``)."""
    arguments = parse_arguments(argv)
    torch.set_num_threads(arguments.threads)
    preset = PRESETS[arguments.preset]
    requested = ["default"] if arguments.methods == ["default"] else arguments.methods
    methods = list(POTTS_METHODS) if requested == ["default"] else resolve_methods(requested)
    extra = method_extras(arguments)
    n_examples = arguments.raise_examples or preset.raise_examples
    # method_options reads a hard_models Preset: only its estimator options matter here.
    options_preset = Preset((), (), {}, {"*": preset.n_hidden}, n_examples, preset.method_options)
    rows: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    started = time.perf_counter()
    for family in arguments.families or preset.families:
        try:
            train, held_out = load_family(
                family, root=arguments.data_root, seed=arguments.seed, max_sequences=preset.max_sequences
            )
        except Exception as error:
            print(f"skipping family {family}: {type(error).__name__}: {error}", file=sys.stderr)
            continue
        for algorithm in arguments.algorithms or preset.algorithms:
            n_updates = arguments.n_updates or preset.n_updates[algorithm]
            model, sidecar, run_directory = obtain_model(
                arguments.cache,
                family,
                train,
                held_out,
                algorithm,
                n_hidden=arguments.n_hidden or preset.n_hidden,
                n_updates=n_updates,
                seed=arguments.seed,
                retrain=arguments.retrain,
            )
            print(
                f"{sidecar['name']}: exact log Z {sidecar['exact_log_z']:.4f}, test LL "
                f"{sidecar['test_log_likelihood']:.2f}, trained in {sidecar['train_seconds']:.0f} s",
                file=sys.stderr,
            )
            model_rows, model_diagnostics = score_model(
                model,
                sidecar,
                methods,
                seed=arguments.seed,
                options_of=functools.partial(
                    method_options,
                    preset=options_preset,
                    extra=extra,
                    held_out=held_out,
                    n_examples=n_examples,
                    dataset=family,
                    run_directory=run_directory,
                    trajectory_as="models",
                    check_data=train if arguments.check_data else None,
                    train=train,
                ),
            )
            rows.extend(model_rows)
            diagnostics.extend(model_diagnostics)
            write_csv(arguments.out / "hard_potts.csv", rows, COLUMNS)
            write_csv(arguments.out / "hard_potts_diagnostics.csv", diagnostics)
    command = "python benchmarks/hard_potts.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"Made by `{command.strip()}` (boltzlab {bl.__version__}).\n\n" + report(rows, methods)
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "hard_potts.md").write_text(text + "\n")
    print(text)
    print(f"\nwall time {time.perf_counter() - started:.0f} s; results in {arguments.out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()

"""How long the command line takes to start: ``boltzlab --help``, each subcommand's ``--help``, ``--version``.

Each case runs in a fresh interpreter, as the ``boltzlab`` script does (``from
boltzlab.cli.main import main; main()`` with the arguments), ``--repeats`` times after one
warm-up run; the figure is the median wall time of the whole process. Beside the commands,
``python -c "import boltzlab"`` and, as the references of the same run, ``python -c "import
torch"`` and ``python -c pass``: every figure is also given as a ratio to ``python -c pass``
(machines here are noisy and differ; the ratios travel better than the seconds).

The code timed is a checkout's ``src/`` and ``experiments/src/`` (``--checkout``, default
this one), put first on ``PYTHONPATH``. ``--before OTHER_CHECKOUT`` times a second checkout
in the same run, alternating with the first case by case, and adds the speed-up
(docs/architecture.md, "Start-up"):

    python benchmarks/startup.py --before ../main --out benchmarks/results/startup.md

Not part of the test suite: tests/cli/test_startup.py checks what the help imports, not how
long it takes.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The subcommands of `boltzlab` (boltzlab.cli.main.COMMANDS), named here so that this script
# imports nothing from the checkouts it times.
SUBCOMMANDS = ("demo", "train", "logz", "evaluate", "sample", "info", "report", "reproduce")
_RUN_CLI = "import sys; from boltzlab.cli.main import main; sys.argv = ['boltzlab', *sys.argv[1:]]; main()"


def cases() -> list[tuple[str, list[str], bool]]:
    """``(label, python arguments, runs the checkout's code)`` for every case, references last."""
    commands = [["--help"], ["--version"], *([name, "--help"] for name in SUBCOMMANDS)]
    return [
        *((f"boltzlab {' '.join(argv)}", ["-c", _RUN_CLI, *argv], True) for argv in commands),
        ('python -c "import boltzlab"', ["-c", "import boltzlab"], True),
        ('python -c "import torch"', ["-c", "import torch"], False),
        ("python -c pass", ["-c", "pass"], False),
    ]


def environment(checkout: Path) -> dict[str, str]:
    """This process's environment with ``checkout``'s sources first on ``PYTHONPATH``."""
    paths = [str(checkout / "src"), str(checkout / "experiments" / "src")]
    inherited = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([inherited] if inherited else [])])}


def run_once(arguments: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one fresh interpreter running ``arguments``; fails on a non-zero exit."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *arguments], env=env, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{arguments} exited with {done.returncode}: {done.stderr.decode(errors='replace')}")
    return seconds


def measure(checkouts: list[Path], repeats: int) -> dict[tuple[str, Path | None], float]:
    """Median seconds of every case for every checkout (``None``: a reference, run once per round).

    The rounds alternate the cases and the checkouts, so a slow spell of the machine falls on
    all of them alike.
    """
    envs = {checkout: environment(checkout) for checkout in checkouts}
    runs: dict[tuple[str, Path | None], list[float]] = {}
    for round_ in range(repeats + 1):  # round 0 warms the file cache and is not counted
        for label, arguments, uses_checkout in cases():
            for checkout in checkouts if uses_checkout else [None]:
                seconds = run_once(arguments, envs[checkout] if checkout is not None else dict(os.environ))
                if round_:
                    runs.setdefault((label, checkout), []).append(seconds)
    return {key: statistics.median(values) for key, values in runs.items()}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def report(
    medians: dict[tuple[str, Path | None], float], after: Path, before: Path | None, repeats: int
) -> str:
    """The markdown table: seconds and ratios to ``python -c pass``, and the speed-up with ``--before``."""
    baseline = medians[("python -c pass", None)]
    header = ["case", "seconds", "× python -c pass"]
    if before is not None:
        header = ["case", "before s", "before ×", "after s", "after ×", "speed-up"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for label, _arguments, uses_checkout in cases():
        now = medians[(label, after if uses_checkout else None)]
        if before is None:
            cells = [f"{now:.3f}", f"{now / baseline:.1f}"]
        elif uses_checkout:
            then = medians[(label, before)]
            cells = [
                f"{then:.3f}",
                f"{then / baseline:.1f}",
                f"{now:.3f}",
                f"{now / baseline:.1f}",
                f"{then / now:.1f}",
            ]
        else:
            cells = [f"{now:.3f}", f"{now / baseline:.1f}", f"{now:.3f}", f"{now / baseline:.1f}", "—"]
        lines.append("| " + " | ".join([f"`{label}`", *cells]) + " |")
    compared = f" Before: `{before}`; after: `{after}`." if before is not None else f" Code: `{after}`."
    return "\n".join(
        [
            "# Start-up of the command line",
            "",
            f"Made by `python benchmarks/startup.py{' --before ' + str(before) if before else ''}` on "
            f"{datetime.date.today().isoformat()}: {platform.platform()}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, torch {_version('torch')}, click {_version('click')}. Median of "
            f"{repeats} fresh processes per case after one warm-up.{compared}",
            "",
            *lines,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkout", type=Path, default=ROOT, help="Checkout whose code is timed (default: this one)."
    )
    parser.add_argument(
        "--before", type=Path, help="A second checkout to time in the same run, e.g. ../main."
    )
    parser.add_argument("--repeats", type=int, default=5, help="Counted runs per case (default 5).")
    parser.add_argument("--out", type=Path, help="Also write the markdown table to this file.")
    arguments = parser.parse_args(argv)
    after = arguments.checkout.resolve()
    before = arguments.before.resolve() if arguments.before is not None else None
    checkouts = [after] if before is None else [before, after]
    text = report(measure(checkouts, arguments.repeats), after, before, arguments.repeats)
    print(text)
    if arguments.out is not None:
        arguments.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()

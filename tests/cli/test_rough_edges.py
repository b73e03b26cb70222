"""Issue 31, "Everyday use": the rough edges a new user met, each run as a user runs it.

Properties checked: long commands show their progress (what runs, chain-sweeps, elapsed,
budget rounds) on a terminal and nothing when piped or with ``--json``; ``sample --out`` writes
the samples themselves by extension and refuses an unknown one; ``report`` refuses a folder
that is no run; errors name the command line's flags and the user's file, never a library
argument or ``x_train``; options an algorithm does not use are refused alike, and so is a 4-D
``.npy``; ``--threads`` works after the subcommand; the end of training and the report say
which update each number belongs to and what each time measured, with one name for the
validation split; ``info`` describes a training trajectory; ``--json`` nests objects, says
``null`` and names objects; a device the machine lacks is one line.
"""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli import progress_display
from boltzlab.cli import reproduce as reproduce_module
from boltzlab.cli.common import Device, command_options
from boltzlab.cli.main import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
N_VISIBLE, N_HIDDEN = 9, 3  # 3×3 images; distinct sizes so a transposition fails loudly
N_UPDATES, TRACK_EVERY = 14, 5  # exact tracking at 0, 5, 10: the final update 14 is not tracked


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny binary .npz dataset: 40 train and 11 test examples of 3×3 images."""
    generator = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("data") / "tiny.npz"
    np.savez(
        path,
        x_train=(generator.random((40, 3, 3)) < 0.3).astype(np.uint8),
        x_test=(generator.random((11, 3, 3)) < 0.3).astype(np.uint8),
    )
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, data_file: Path) -> tuple[Path, Result]:
    """A PCD run whose exact tracking last ran before its final update, and what train printed."""
    out = tmp_path_factory.mktemp("runs") / "run"
    result = invoke(
        "train", "--data", data_file, "--hidden", N_HIDDEN, "--algorithm", "pcd", "--chains", 13,
        "--batch-size", 10, "--updates", N_UPDATES, "--learning-rate", 0.1, "--track-exact-every", TRACK_EVERY,
        "--log-every", TRACK_EVERY, "--seed", 3, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out, result


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend stdout and stderr are a terminal (CliRunner's streams are not)."""
    monkeypatch.setattr(progress_display, "on_terminal", lambda: True)


# --------------------------------------------------------------------------- 1. progress
def test_logz_shows_what_runs_the_rounds_and_the_time_on_a_terminal(trained, terminal) -> None:
    model = trained[0] / "model.safetensors"
    # No --chains: AIS's chain budget grows towards an unreachable target, in rounds.
    result = invoke(
        "logz", model, "--method", "ais", "--temperatures", 30, "--max-chains", 300, "--target-stderr", 1e-9
    )
    assert result.exit_code == 0, result.output
    bar = result.stderr
    assert re.search(r"ais: [\d.]+k? chain-sweeps in 00:\d\d", bar), bar  # what, how far, elapsed
    assert "lower-bound witness" in bar and "estimating" in bar and "verdict checks" in bar
    assert re.search(r"round 2: \+[\d,]+ chains", bar) and bar.rstrip().endswith("done"), bar
    assert "chain-sweeps in 00:" not in result.stdout and "\r" not in result.stdout  # results stay clean


def test_evaluate_shows_each_method_on_a_terminal_and_nothing_with_json(trained, data_file, terminal) -> None:
    model = trained[0] / "model.safetensors"
    # exact then AIS: two methods, each with its own numbered line (an RTS run with its pilot,
    # witness and trajectory route took 3 s more and showed nothing else).
    args = ["evaluate", model, "--data", data_file, "--methods", "exact,ais", "--budget", 40, "--chains", 10]
    shown = invoke(*args)
    assert shown.exit_code == 0, shown.output
    assert "[1/2] exact" in shown.stderr and "[2/2] ais" in shown.stderr
    quiet = invoke(*args, "--json")
    assert quiet.exit_code == 0 and "chain-sweeps" not in quiet.stderr and "[1/2]" not in quiet.stderr
    json.loads(quiet.stdout)


def test_nothing_is_shown_when_piped(trained, data_file) -> None:
    model = trained[0] / "model.safetensors"
    for args in (
        ["logz", model, "--method", "ais", "--chains", 10, "--temperatures", 30],
        ["sample", model, "--sampler", "pt", "--chains", 3, "--sweeps", 20, "--keep-every", 10, "--out",
         trained[0] / "piped.npy"],
    ):  # fmt: skip
        result = invoke(*args)
        assert result.exit_code == 0, result.output
        assert "chain-sweeps" not in result.stderr and "sweep/s" not in result.stderr, result.stderr


@pytest.mark.slow
def test_a_real_terminal_of_zero_columns_gets_a_bar(trained) -> None:
    """In a pseudo-terminal that reports 0 columns (as `script` and some consoles do), tqdm drew
    empty lines; the bar now has a width. A separate process, as a user runs it."""
    main, secondary = pty.openpty()
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": ""}
    command = [sys.executable, "-m", "boltzlab.cli.main", "logz", str(trained[0] / "model.safetensors"),
               "--method", "ais", "--chains", "20", "--temperatures", "200"]  # fmt: skip
    process = subprocess.Popen(command, stdout=secondary, stderr=secondary, env=environment)
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert process.wait(timeout=120) == 0, output.decode(errors="replace")
    text = output.decode(errors="replace")
    assert "ais: " in text and "chain-sweeps" in text and "done" in text, text
    assert "log Z = " in text


# --------------------------------------------------------------------------- 2. samples out
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv"])
def test_sample_writes_the_samples_themselves_by_extension(trained, tmp_path: Path, suffix: str) -> None:
    model_path = trained[0] / "model.safetensors"
    out = tmp_path / f"samples{suffix}"
    result = invoke("sample", model_path, "--chains", 4, "--sweeps", 30, "--keep-every", 10, "--burn-in", 5,
                    "--seed", 2, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output and not out.read_bytes().startswith(PNG_MAGIC)
    expected = bl.sample(
        bl.RBM.load(model_path), n_chains=4, n_sweeps=30, generator=2, keep_every=10, burn_in=5
    ).samples.to(torch.uint8)  # (3 kept, 4 chains, 9 units)
    if suffix == ".npy":
        written = np.load(out)
        assert written.dtype == np.uint8 and np.array_equal(written, expected.numpy())
    elif suffix == ".npz":
        archive = np.load(out)
        assert np.array_equal(archive["samples"], expected.numpy())
        assert archive["sweeps"].tolist() == [15, 25, 35] and archive["chains"].tolist() == [0, 1, 2, 3]
    else:
        with out.open(newline="") as handle:
            rows = list(csv.reader(handle))
        assert rows[0] == ["chain", "sweep", *(f"v{unit}" for unit in range(N_VISIBLE))]
        assert len(rows) == 1 + 4 * 3 and rows[1][:2] == ["0", "15"] and rows[4][:2] == ["1", "15"]
        assert [int(cell) for cell in rows[5][2:]] == expected[1, 1].tolist()  # chain 1, second sample


@pytest.mark.parametrize("name", ["samples.jpg", "samples"])
def test_sample_refuses_an_extension_it_cannot_write_before_sampling(trained, tmp_path: Path, name) -> None:
    out = tmp_path / name
    result = invoke("sample", trained[0] / "model.safetensors", "--out", out)
    assert_one_line_error(result, f"--out {out}", ".png", ".npy", ".npz", ".csv")
    assert not out.exists() and "model:" not in result.stdout


# --------------------------------------------------------------------------- 3. report
def test_report_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a run")
    result = invoke("report", tmp_path)
    assert_one_line_error(result, "is not a run folder", "config.toml", "model.safetensors")
    assert not (tmp_path / "report.html").exists()


# --------------------------------------------------------------------------- 4. errors in flags
def test_errors_name_the_flags_and_the_file_not_library_arguments(tmp_path: Path) -> None:
    generator = np.random.default_rng(0)
    np.savetxt(tmp_path / "pixels.dat", (generator.random((6, 9)) < 0.5).astype(int), fmt="%d", delimiter=",")
    np.save(tmp_path / "three.npy", (generator.random((3, 3, 3)) < 0.5).astype(np.uint8))
    np.save(tmp_path / "grey.npy", generator.random((5, 3, 3)))
    (tmp_path / "folder").mkdir()
    train = ["train", "--hidden", 2, "--updates", 2, "--out", tmp_path / "run"]
    cases = [
        (tmp_path / "pixels.dat", ["cannot tell the format from the file name", "rename the file"]),
        (tmp_path / "folder", ["is a folder", f"--data-root {tmp_path / 'folder'}"]),
        (
            tmp_path / "three.npy",
            ["--batch-size 100 exceeds the 3 training examples", "--batch-size 3 or less"],
        ),
        (
            tmp_path / "grey.npy",
            ["grey.npy: the data must be binary", "--binarize 'threshold'", "--pixel-max"],
        ),
    ]
    for path, fragments in cases:
        line = assert_one_line_error(invoke(*train, "--data", path), *fragments)
        for library_name in ("format=", "root=", "batch_size", "binarize=", "pixel_max", "x_train"):
            assert library_name not in line, line
    assert not (tmp_path / "run").exists()  # refused before the run folder was claimed
    # The library itself keeps naming its arguments (and the flag beside them).
    with pytest.raises(bl.errors.DataError, match=r"binarize= \(--binarize\)"):
        bl.data.load(tmp_path / "grey.npy")


# --------------------------------------------------------------------------- 5. options refused alike
def test_options_the_algorithm_does_not_use_are_refused_alike(data_file: Path, tmp_path: Path) -> None:
    train = ["train", "--data", data_file, "--hidden", 2, "--updates", 2, "--out", tmp_path / "run"]
    assert_one_line_error(
        invoke(*train, "--algorithm", "cd", "--chains", 5), "--chains applies to --algorithm", "not 'cd'"
    )
    assert_one_line_error(
        invoke(*train, "--algorithm", "pcd", "--levels", 5), "--levels applies to --algorithm", "not 'pcd'"
    )
    assert not (tmp_path / "run" / "config.toml").exists()  # --chains was written there before


def test_a_four_dimensional_npy_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "four.npy", np.zeros((6, 2, 3, 3), dtype=np.uint8))
    result = invoke("train", "--data", tmp_path / "four.npy", "--hidden", 2, "--batch-size", 2, "--out",
                    tmp_path / "run")  # fmt: skip
    assert_one_line_error(result, "four.npy", "(6, 2, 3, 3) (4-D)", "(n_examples, height, width)", "reshape")


def test_evaluate_refuses_examples_no_chosen_method_uses(trained, data_file: Path) -> None:
    result = invoke("evaluate", trained[0] / "model.safetensors", "--data", data_file, "--methods", "exact",
                    "--examples", 5)  # fmt: skip
    assert_one_line_error(result, "--examples applies to raise", "--methods exact")


# --------------------------------------------------------------------------- 6. --threads
def test_threads_works_after_the_subcommand_like_debug(trained) -> None:
    before = torch.get_num_threads()
    result = invoke("info", trained[0] / "model.safetensors", "--threads", 2)
    assert result.exit_code == 0, result.output
    assert torch.get_num_threads() == 2
    torch.set_num_threads(before)
    assert "--threads" in invoke("train", "--help").output


# --------------------------------------------------------------------------- 7. which update, what time
def test_the_end_of_training_says_which_update_and_what_was_timed(trained) -> None:
    out, result = trained
    lines = result.stdout.splitlines()
    timing = next(line for line in lines if line.startswith(f"trained to update {N_UPDATES} in "))
    assert "of training loop (metrics.csv's time)" in timing and "the whole training call took" in timing
    final = next(line for line in lines if line.startswith(f"final model (update {N_UPDATES}):"))
    exact = bl.exact_log_z(bl.RBM.load(out / "model.safetensors"))
    assert f"exact log Z {exact:.4f}" in final and "validation log-likelihood" in final
    tracked = [row for row in csv.DictReader((out / "metrics.csv").open()) if row["log_z"]]
    assert int(tracked[-1]["update"]) == 10  # what the end line used to pass off as final
    assert "held-out" not in result.stdout
    assert "(validation, the test split: 11 examples)" in result.stdout  # the name, said once


def test_the_report_gives_the_final_log_z_with_its_update(trained) -> None:
    out = trained[0]
    assert invoke("report", out).exit_code == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    exact = bl.exact_log_z(bl.RBM.load(out / "model.safetensors"))
    assert f"the run ended at update {N_UPDATES}" in page and "(last tracked)" in page
    assert "log z of the final model (exact" in page and f"{exact:.6g}" in page
    assert f"exact, final model (update {N_UPDATES}" in page and "validation LL" in page
    assert "held-out LL" not in page
    assert "training loop&#x27;s own clock" in page or "training loop's own clock" in page


# --------------------------------------------------------------------------- 8. info
def test_info_describes_a_training_trajectory(trained) -> None:
    path = trained[0] / "trajectory.safetensors"
    result = invoke("info", path)
    assert result.exit_code == 0, result.output
    assert (
        "training trajectory (boltzlab-trajectory)" in result.stdout
        and "snapshots of an RBM 9×3" in result.stdout
    )
    assert "--method trajectory-ais" in result.stdout and "re-save" not in result.output
    record = json.loads(invoke("info", path, "--json").stdout)
    assert record["kind"] == "trajectory" and record["updates"][-1] == N_UPDATES
    assert record["metadata"]["training"]["operator"] == "gibbs"


# --------------------------------------------------------------------------- 9. --json
def _keys(value: object) -> list[str]:
    if isinstance(value, dict):
        return [key for key, item in value.items() for key in [key, *_keys(item)]]
    if isinstance(value, list):
        return [key for item in value for key in _keys(item)]
    return []


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return [value] if isinstance(value, str) else []


def test_json_nests_objects_says_null_and_names_objects(trained, data_file: Path) -> None:
    model = trained[0] / "model.safetensors"
    grown = json.loads(
        invoke("logz", model, "--method", "ais", "--temperatures", 30, "--max-chains", 300, "--json").stdout
    )
    assert (
        isinstance(grown["diagnostics"]["budget"], dict)
        and grown["diagnostics"]["budget"]["max_chains"] == 300
    )
    assert not [key for key in _keys(grown) if "." in key]
    args = ["evaluate", model, "--data", data_file, "--methods", "exact,ais", "--chains", 10, "--budget", 30]
    evaluated = json.loads(invoke(*args, "--json").stdout)
    for row in evaluated["rows"]:
        assert row["budget_grew"] is None and row["route_note"] is None
        assert not [key for key in _keys(row) if "." in key]
    described = json.loads(invoke("info", model, "--json").stdout)
    training = described["metadata"]["training"]
    assert (training["operator"], training["operator_params"], training["lr_schedule"]) == (
        "gibbs",
        {},
        "constant",
    )
    reprs = [text for text in _strings(described) if re.fullmatch(r"[A-Z]\w*\(.*\)", text)]
    assert reprs == []  # no "GibbsOperator()", "ConstantSchedule()"


# --------------------------------------------------------------------------- 10. devices
@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_a_device_the_machine_lacks_is_one_line(monkeypatch: pytest.MonkeyPatch, trained) -> None:
    """reproduce cast and front-end take --device; a stand-in plugin with the same option."""

    @click.command("study")
    @click.option("--device", type=Device(), default="cpu")
    @command_options
    def study(device: str) -> None:
        torch.zeros(1, device=device)
        click.echo(f"ran on {device}")

    class EntryPoint:
        def load(self) -> click.Command:
            return study

    monkeypatch.setattr(reproduce_module, "discover", lambda: {"study": EntryPoint()})
    assert invoke("reproduce", "study").output.strip() == "ran on cpu"
    assert_one_line_error(invoke("reproduce", "study", "--device", "cuda"), "--device 'cuda' asks for a GPU",
                          "use --device cpu")  # fmt: skip
    assert_one_line_error(
        invoke("reproduce", "study", "--device", "gpu"), "'gpu' is not a device torch knows"
    )
    # The library's doors say the same, in their own argument's name.
    for door in (
        lambda: bl.RBM.load(trained[0] / "model.safetensors", device="cuda"),
        lambda: bl.models.trajectory.Trajectory.load(trained[0] / "trajectory.safetensors", device="cuda"),
    ):
        with pytest.raises(
            bl.errors.ValidationError, match=r"device 'cuda' asks for a GPU.*use device='cpu'"
        ):
            door()
    with pytest.raises(ValueError, match="asks for a GPU"):
        bl.rng.make_generator(0, "cuda")


@pytest.mark.slow  # a separate process, as a user runs it: 4 s of imports alone
def test_a_reader_that_goes_away_is_no_error(trained) -> None:
    """``boltzlab info M | head -1``: the pipe closes before the command writes. It printed
    "error: Broken pipe"; it now exits quietly with 141 (128 + SIGPIPE), as a killed writer would."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        done = subprocess.run(
            [sys.executable, "-m", "boltzlab.cli.main", "info", str(trained[0] / "model.safetensors")],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == "", done.stderr

"""The command line: every command runs, writes what it says, and fails in one readable line.

Properties checked: every ``--help`` shows an example; ``demo`` (tiny budget) writes the
model, metrics, config and both PNGs and prints log Z; ``train`` writes the run layout and a
``config.toml`` that records the effective options and reads back; ``info`` and ``logz``
read the trained model, ``logz --method exact`` prints the library's exact value and AIS
lands within 4 of its standard errors; ``sample`` writes a PNG whose samples are those of one
``bl.sample`` call; a config file supplies options and flags win; and every error (missing or
corrupt model file, unknown operator, non-binary data, bad config) is exit status 1 and one
line ``error: ...`` on stderr without a traceback, unless ``--debug`` asks for it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.config import to_toml
from boltzlab.cli.main import cli
from boltzlab.cli.memory import check_memory, format_bytes
from boltzlab.errors import ModelFileError, ValidationError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
N_VISIBLE, N_HIDDEN = 9, 3  # 3×3 images; distinct sizes so a transposition fails loudly


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


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
def run_dir(tmp_path_factory: pytest.TempPathFactory, data_file: Path) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    result = invoke(
        "train", "--data", data_file, "--hidden", N_HIDDEN, "--algorithm", "pcd", "--chains", 13,
        "--batch-size", 10, "--updates", 20, "--learning-rate", 0.1, "--track-exact-every", 10,
        "--log-every", 5, "--seed", 3, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_a_trained_model_keeps_its_witness_and_logz_checks_from_it(run_dir: Path, tmp_path: Path) -> None:
    """Training keeps the rows that fitted the base (40 here); without them logz says unchecked."""
    model_path = run_dir / "model.safetensors"
    shown = invoke("info", model_path)
    assert "witness: 40 training rows kept" in shown.output
    assert json.loads(invoke("info", model_path, "--json").output)["witness_rows"] == 40
    checked = invoke("logz", model_path, "--method", "ais", "--chains", 50, "--temperatures", 100)
    assert checked.exit_code == 0 and "verdict: reliable" in checked.output, checked.output
    assert "started at the witness rows and base" in checked.output
    bare = bl.RBM.load(model_path).clear_witness().save(tmp_path / "bare.safetensors")
    assert "witness: none" in invoke("info", bare).output
    result = invoke("logz", bare, "--method", "ais", "--chains", 50, "--temperatures", 100)
    assert result.exit_code == 0 and "verdict: unchecked" in result.output, result.output
    assert "check_data=<training rows> (CLI: --data)" in result.output
    record = json.loads(invoke("logz", bare, "--method", "ais", "--chains", 50, "--json").output)
    assert record["reliable"] is False and record["verdict"] == "unchecked"
    assert record["unchecked"] == record["warnings"][0] and record["lower_bound"]["started_from"] == "base"


def test_train_witness_rows_zero_keeps_no_data_in_the_model(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "private"
    result = invoke(
        "train", "--data", data_file, "--hidden", N_HIDDEN, "--updates", 5, "--batch-size", 10, "--witness-rows", 0,
        "--snapshots", 0, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    model = bl.RBM.load(out / "model.safetensors")
    assert model.base_fitted and model.witness is None


@pytest.mark.parametrize("command", ["", "demo", "train", "logz", "sample", "info"])
def test_every_help_shows_an_example(command: str) -> None:
    result = invoke(*([command] if command else []), "--help")
    assert result.exit_code == 0
    assert "Example" in result.output


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and bl.__version__ in result.output


@pytest.mark.slow
def test_demo_writes_everything_and_prints_log_z(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = invoke(
        "demo", "--out", out, "--epochs", 1, "--hidden", 4, "--ais-chains", 20,
        "--ais-temperatures", 100, "--sample-sweeps", 5,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "log Z" in result.output and "exact (2^4 states)" in result.output
    # Three independent sampling estimates, each pair compared in combined standard errors.
    for label in ("AIS, gibbs sweeps", "AIS, flip sweeps", "RTS, gibbs sweeps", "from RTS log Z"):
        assert label in result.output, label
    assert result.output.count("combined s.e.") == 3
    for name in (
        "model.safetensors",
        "metrics.csv",
        "config.toml",
        "plots/samples.png",
        "plots/training.png",
    ):
        assert (out / name).is_file(), name
        assert f"wrote {out / name}" in result.output
    for name in ("samples.png", "training.png"):
        assert (out / "plots" / name).read_bytes().startswith(PNG_MAGIC)
    config = tomllib.loads((out / "config.toml").read_text())
    assert config["hidden"] == 4 and config["epochs"] == 1 and config["operator"] == "gibbs"
    assert bl.RBM.load(out / "model.safetensors").n_hidden == 4


def test_train_writes_the_run_layout(run_dir: Path, data_file: Path) -> None:
    for name in (
        "config.toml",
        "metrics.csv",
        "model.safetensors",
        "plots/training.png",
        "plots/samples.png",
    ):
        assert (run_dir / name).is_file(), name
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["checkpoint-000000020.safetensors"]
    config = tomllib.loads((run_dir / "config.toml").read_text())
    assert config["data"] == str(data_file) and config["hidden"] == N_HIDDEN and config["updates"] == 20
    assert config["learning_rate"] == 0.1 and config["momentum"] == 0.0  # effective defaults recorded
    assert "epochs" not in config and "out" not in config
    header, *rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert header.startswith("update,") and len(rows) == 5  # updates 0, 5, 10, 15, 20
    model = bl.RBM.load(run_dir / "model.safetensors")
    assert (model.n_visible, model.n_hidden) == (N_VISIBLE, N_HIDDEN) and model.base_fitted
    assert model.metadata["data"]["image_shape"] == [3, 3]


def test_train_refuses_an_existing_run_without_resume(run_dir: Path, data_file: Path) -> None:
    result = invoke("train", "--data", data_file, "--hidden", N_HIDDEN, "--updates", 5, "--out", run_dir)
    assert_one_line_error(result, "--resume")


def test_info_describes_the_trained_model(run_dir: Path) -> None:
    result = invoke("info", run_dir / "model.safetensors")
    assert result.exit_code == 0, result.output
    exact = bl.exact_log_z(bl.RBM.load(run_dir / "model.safetensors"))
    for fragment in (
        "kind: rbm",
        f"{N_VISIBLE} × {N_HIDDEN}",
        "float32",
        "base-rate",
        "weights",
        "training.",
    ):
        assert fragment in result.output
    assert f"exact log Z: {exact:.6f}" in result.output


@pytest.mark.fault("untrusted strings")
def test_info_escapes_control_characters_and_cuts_long_metadata(tmp_path: Path) -> None:
    """Metadata is untrusted: a terminal must not receive its escape sequences, nor 20 MB of it."""
    path = tmp_path / "hostile.safetensors"
    title = "\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b"
    bl.RBM(n_visible=4, n_hidden=2, generator=0).save(
        path, metadata={"title": title, "big": "y" * 20_000_000, "ke\x1by": ["\x1b[31m"]}
    )
    result = invoke("info", path)
    assert result.exit_code == 0, result.output
    assert not any((0x00 <= ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 for c in result.output)
    assert "\u202e" not in result.output
    assert "title: \\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\\x9b" in result.output
    assert "ke\\x1by: " in result.output
    assert "… (20,000,000 characters, first 200 shown)" in result.output
    assert len(result.output) < 5_000
    # --json keeps every character, escaped by the JSON encoder.
    shown = json.loads(invoke("info", path, "--json").output)
    assert shown["metadata"]["title"] == title and len(shown["metadata"]["big"]) == 20_000_000


def _printed_log_z(output: str) -> tuple[float, float]:
    match = re.search(r"log Z = (-?[\d.]+)(?: ± ([\d.]+))?", output)
    assert match, output
    return float(match.group(1)), float(match.group(2) or 0.0)


def test_logz_exact_and_ais_agree(run_dir: Path) -> None:
    model_path = run_dir / "model.safetensors"
    exact = bl.exact_log_z(bl.RBM.load(model_path))
    result = invoke("logz", model_path, "--method", "exact")
    assert result.exit_code == 0, result.output
    assert _printed_log_z(result.output) == (pytest.approx(exact, abs=1e-6), 0.0)
    result = invoke("logz", model_path, "--method", "ais", "--chains", 50, "--temperatures", 300, "--seed", 1)
    assert result.exit_code == 0, result.output
    value, stderr = _printed_log_z(result.output)
    assert stderr > 0 and abs(value - exact) < 4 * stderr
    assert "ESS" in result.output and "chain-sweeps" in result.output


@pytest.mark.slow
def test_logz_anchored_ais_anchors_on_data_and_needs_it(run_dir: Path, data_file: Path) -> None:
    model_path = run_dir / "model.safetensors"
    exact = bl.exact_log_z(bl.RBM.load(model_path))
    result = invoke(
        "logz",
        model_path,
        "--method",
        "anchored-ais",
        "--data",
        data_file,
        "--temperatures",
        300,
        "--seed",
        1,
    )
    assert result.exit_code == 0, result.output
    value, stderr = _printed_log_z(result.output)
    assert stderr > 0 and abs(value - exact) < 4 * stderr
    assert "reliable" in result.output
    # Without --data the model's witness rows (the training rows it kept) anchor it ...
    kept = invoke("logz", model_path, "--method", "anchored-ais", "--temperatures", 300, "--seed", 1)
    assert kept.exit_code == 0 and "verdict: reliable" in kept.output, kept.output
    assert "started at the witness rows" in kept.output
    # ... and a model that keeps none needs data.
    bare = bl.RBM.load(model_path).clear_witness().save(run_dir.parent / "bare.safetensors")
    assert_one_line_error(invoke("logz", bare, "--method", "anchored-ais"), "anchor_data", "--data")


def test_logz_refuses_sampling_options_for_exact(run_dir: Path) -> None:
    assert_one_line_error(
        invoke("logz", run_dir / "model.safetensors", "--method", "exact", "--chains", 5), "--chains"
    )


def test_sample_writes_a_png_of_one_sampling_run(run_dir: Path, tmp_path: Path) -> None:
    from boltzlab.cli.sample import _run_plain

    out = tmp_path / "strip.png"
    result = invoke(
        "sample",
        run_dir / "model.safetensors",
        "--chains",
        5,
        "--sweeps",
        60,
        "--keep-every",
        6,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG_MAGIC) and f"wrote {out}" in result.output
    # The progress bar runs the sampler in chunks; the samples are still one call's.
    model = bl.RBM.load(run_dir / "model.safetensors")
    options = {"keep_every": 7, "sweeps": 400, "seed": 2, "chains": 5, "operator": "flip", "burn_in": 3}
    chunked, _ = _run_plain(model, options, bl.operators.get("flip"), show=False)
    single = bl.sample(model, operator="flip", n_chains=5, n_sweeps=400, generator=2, keep_every=7, burn_in=3)
    assert torch.equal(chunked, single.samples)


# ----------------------------------------------------------------------------- config files
def test_config_file_supplies_options_and_flags_win(tmp_path: Path, data_file: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        f'data = "{data_file}"\nhidden = 5\nbatch-size = 10\nepochs = 3\nlearning_rate = 0.05\nseed = 7\n'
    )
    out = tmp_path / "run"
    result = invoke("train", "--config", config, "--hidden", 2, "--updates", 4, "--out", out)
    assert result.exit_code == 0, result.output
    assert bl.RBM.load(out / "model.safetensors").n_hidden == 2  # the flag beat the file's 5
    recorded = tomllib.loads((out / "config.toml").read_text())
    assert recorded["hidden"] == 2 and recorded["updates"] == 4 and "epochs" not in recorded
    assert recorded["batch_size"] == 10 and recorded["learning_rate"] == 0.05 and recorded["seed"] == 7
    assert "trained to update 4 " in result.output


def test_unknown_config_key_is_named(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('data = "digits"\nhiden = 3\n')
    assert_one_line_error(invoke("train", "--config", config, "--out", tmp_path / "run"), "hiden", "run.toml")


def test_bad_toml_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("hidden = = 3\n")
    assert_one_line_error(invoke("train", "--config", config), "not valid TOML")
    assert_one_line_error(invoke("train", "--config", tmp_path / "absent.toml"), "does not exist")


def test_toml_writer_round_trips() -> None:
    values = {"name": 'a "quoted"\\ path\nwith ünïcode', "n": 7, "rate": 1e-05, "big": 2.5e300,
              "neg": -0.1, "flag": True, "off": False, "inf": float("inf"), "skipped": None}  # fmt: skip
    read = tomllib.loads(to_toml(values, comment="two\nlines"))
    assert read == {key: value for key, value in values.items() if value is not None}


# ----------------------------------------------------------------------------- errors
def test_missing_model_file(tmp_path: Path) -> None:
    assert_one_line_error(invoke("info", tmp_path / "absent.safetensors"), "absent.safetensors")


def test_corrupt_model_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    for command in ("info", "logz", "sample"):
        assert_one_line_error(invoke(command, path), "corrupt.safetensors")


def test_unknown_operator(run_dir: Path, data_file: Path, tmp_path: Path) -> None:
    result = invoke(
        "train",
        "--data",
        data_file,
        "--hidden",
        2,
        "--batch-size",
        10,
        "--operator",
        "nope",
        "--out",
        tmp_path / "r",
    )
    assert_one_line_error(result, "nope", "gibbs")
    result = invoke(
        "sample", run_dir / "model.safetensors", "--operator", "nope", "--out", tmp_path / "s.png"
    )
    assert_one_line_error(result, "nope")


def test_non_binary_data_file(tmp_path: Path) -> None:
    path = tmp_path / "grey.npz"
    np.savez(path, x_train=np.full((20, 4), 0.5, dtype=np.float32))
    assert_one_line_error(invoke("train", "--data", path, "--hidden", 2, "--out", tmp_path / "r"), "grey.npz")


def test_usage_errors_keep_clicks_exit_status() -> None:
    assert invoke("train", "--data", "digits", "--hidden", "many").exit_code == 2


def test_keyboard_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, run_dir: Path) -> None:
    def interrupted(path: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("boltzlab.cli.info.load_model_file", interrupted)
    result = invoke("info", run_dir / "model.safetensors")
    assert result.exit_code == 130 and result.stderr.strip() == "error: interrupted"


@pytest.mark.slow
def test_debug_lets_the_exception_through(tmp_path: Path) -> None:
    for args in (["--debug", "info", tmp_path / "absent"], ["info", tmp_path / "absent", "--debug"]):
        result = invoke(*args)
        assert result.exit_code == 1 and isinstance(result.exception, ModelFileError)
    # The installed script prints the traceback on stderr.
    script = [sys.executable, "-c", "from boltzlab.cli.main import main; main()"]
    shown = subprocess.run(
        [*script, "--debug", "info", str(tmp_path / "absent")], capture_output=True, text=True
    )
    assert shown.returncode == 1 and "Traceback" in shown.stderr and "ModelFileError" in shown.stderr
    plain = subprocess.run([*script, "info", str(tmp_path / "absent")], capture_output=True, text=True)
    assert plain.returncode == 1 and plain.stderr.startswith("error: ") and "Traceback" not in plain.stderr


@pytest.mark.slow
def test_logz_and_evaluate_json_print_one_object(run_dir: Path, data_file: Path) -> None:
    model_path = run_dir / "model.safetensors"
    exact = bl.exact_log_z(bl.RBM.load(model_path))
    result = invoke("logz", model_path, "--method", "ais", "--temperatures", 200, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["method"] == "ais" and record["world_size"] == 1 and record["bias"] == "lower"
    assert abs(record["log_z"] - exact) < 4 * record["stderr"] + 1e-9
    assert record["cost_sweeps"] > 0 and isinstance(record["reliable"], bool)
    assert record["diagnostics"]["n_chains"] == 100 and "ess" in record["diagnostics"]
    common = ["--data", data_file, "--budget", 50, "--chains", 16]  # no RAISE: no --examples
    result = invoke("evaluate", model_path, *common, "--methods", "exact,ais,anchored-ais", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [row["method"] for row in report["rows"]] == ["exact", "ais", "anchored-ais"]
    assert report["rows"][0]["log_z"] == pytest.approx(exact)
    assert "anchor_share" in report["rows"][2]["diagnostics"]
    assert isinstance(report["disagreements"], list) and report["sandwich"] is None


@pytest.mark.fault("absurd arguments")
@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--seed", "100000000000000000000000"], "'--seed': 100000000000000000000000 is not in the range"),
        (["--epochs", "100000000"], "'--epochs': 100000000 is not in the range 1<=x<=1000000"),
        (["--updates", "10000000000"], "'--updates': 10000000000 is not in the range"),
        (["--learning-rate", "1e30"], "'--learning-rate': 1e+30 is not in the range 0.0<x<=10.0"),
        (["--learning-rate", "nan"], "'--learning-rate': 'nan' is not a finite number"),
        (["--pixel-max", "nan"], "'--pixel-max': 'nan' is not a finite number"),
        (["--momentum", "inf"], "'--momentum': 'inf' is not a finite number"),
    ],
)
def test_train_refuses_absurd_numbers_before_writing(
    tmp_path: Path, data_file: Path, flags: list[str], fragment: str
) -> None:
    result = invoke("train", "--data", data_file, "--hidden", N_HIDDEN, "--out", tmp_path / "run", *flags)
    assert result.exit_code == 2 and fragment in result.output, result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.fault("absurd arguments")
@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        (
            ["train", "--hidden", "100000000", "--updates", "1"],
            "the trajectory's 64 snapshots of the weights",
        ),
        (
            ["train", "--hidden", "3", "--algorithm", "pcd", "--chains", "1000000000", "--updates", "1"],
            "the chains (1,000,000,000 × 12 units",
        ),
        (
            ["logz", "MODEL", "--temperatures", "1000000000000"],
            "the schedule's 1,000,000,000,000 temperatures",
        ),
        (["logz", "MODEL", "--chains", "1000000000"], "use fewer --chains or --temperatures"),
        (["sample", "MODEL", "--chains", "1000000000"], "use fewer --chains or --levels"),
    ],
)
def test_memory_is_checked_before_it_is_taken(
    tmp_path: Path, data_file: Path, run_dir: Path, command: list[str], fragment: str
) -> None:
    """``--chains 1000000000`` and the like: one line with the size and the flag, nothing allocated."""
    args = [str(run_dir / "model.safetensors") if arg == "MODEL" else arg for arg in command]
    if args[0] == "train":
        args += ["--data", str(data_file), "--out", str(tmp_path / "run")]
    else:
        args += ["--out", str(tmp_path / "out.png")] if args[0] == "sample" else []
    result = invoke(*args)
    assert_one_line_error(result, "would need at least", "half of this machine's", fragment)
    assert not (tmp_path / "run").exists()


def test_check_memory_adds_the_parts_and_names_the_largest() -> None:
    check_memory({"a": 4e9, "b": 1e9}, command="x", fix="f", total=16_000_000_000)  # 5 GB of 8 allowed
    with pytest.raises(
        ValidationError,
        match=r"x would need at least 9 GB of memory, more than 8 GB \(half of this machine's 16 GB\); the largest part is a, 8 GB: f",
    ):
        check_memory({"a": 8e9, "b": 1e9}, command="x", fix="f", total=16_000_000_000)
    assert [format_bytes(n) for n in (12, 1.5e3, 2.5e9, 3e15)] == ["12 B", "1.5 kB", "2.5 GB", "3 PB"]

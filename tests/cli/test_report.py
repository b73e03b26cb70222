"""``boltzlab report`` and the report page at the end of ``train``, ``demo``-style and ``evaluate --out``.

Properties checked: a finished ``train`` run has ``report.html`` with the six sections in
order, each holding content or its "not recorded" line; the page is self-contained (no script,
no link or image outside it: every image a base64 PNG that decodes); a tempered run gets the
training-time rates and a fresh tempered run, a plain run says tempering was not used;
``evaluate --out`` saves ``evaluation.json`` and the page shows every method with its error bar
and verdict and the reasons of an UNRELIABLE one; every text is escaped (a hostile
``summary.md`` and table cells stay text); unreadable files become warning lines, not
failures; ``metrics.csv`` reads back into the records the trainer wrote. The browser test
renders a real run's page in headless Chromium and checks the screenshot and the DOM; it skips
where no Chromium is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

import boltzlab as bl
from boltzlab.cli.main import cli
from boltzlab.cli.run_files import read_metrics
from boltzlab.cli.run_report import SECTION_KEYS
from boltzlab.plotting.report_page import Image, Paragraph, ReportPage, Section, Table, render_page

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SECTION = re.compile(r'<section id="([a-z-]+)"><h2>([^<]*)</h2>(.*?)</section>', re.DOTALL)


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(arg) for arg in args])


def sections_of(page: str) -> dict[str, str]:
    return {key: body for key, _title, body in SECTION.findall(page)}


@pytest.fixture(scope="module")
def tempered_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 64×16 PT run with exact tracking, evaluated with exact and AIS (``--out``).

    Two rows are what the report tests read (an RTS row, with its pilot, witness and trajectory
    route, took 5 s more and shows the same table cells)."""
    out = tmp_path_factory.mktemp("report") / "pt run <&>"
    result = invoke(
        "train", "--data", "digits", "--hidden", "16", "--algorithm", "pt", "--levels", "4",
        "--updates", "60", "--log-every", "20", "--track-exact-every", "30", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'report.html'}" in result.output
    result = invoke(
        "evaluate", out / "model.safetensors", "--data", "digits", "--methods", "exact,ais",
        "--budget", "100", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"wrote {out / 'evaluation.json'}" in result.output
    return out


@pytest.mark.slow
def test_train_writes_a_self_contained_page_with_every_section(tempered_run: Path):
    page = (tempered_run / "report.html").read_text(encoding="utf-8")
    found = SECTION.findall(page)
    assert [key for key, _, _ in found][: len(SECTION_KEYS)] == list(SECTION_KEYS)
    assert all(body.strip() for _, _, body in found)
    # Self-contained: no script, and nothing fetched from outside the file.
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)="(?!data:image/png;base64,|#)', page)
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) >= 4  # training curves, samples, tempering rates, the fresh PT run
    assert all(base64.b64decode(image).startswith(PNG_MAGIC) for image in images)
    # The directory name holds <&>: escaped in the title, never raw markup.
    assert "pt run &lt;&amp;&gt;" in page and "pt run <&>" not in page


def test_tempered_run_shows_rates_and_log_z_table_with_verdicts(tempered_run: Path):
    sections = sections_of((tempered_run / "report.html").read_text(encoding="utf-8"))
    assert "tempering rates during training" in sections["tempering"]
    assert "swap acceptance" in sections["tempering"]
    assert "a pt run drawn for this report" in sections["tempering"]
    evaluation = json.loads((tempered_run / "evaluation.json").read_text(encoding="utf-8"))
    log_z = sections["log-z"]
    for row in evaluation["rows"]:
        assert f"<td>{row['method']}</td>" in log_z
        assert f"{row['log_z']:.4f}" in log_z
        if row["method"] != "exact":
            assert f"± {row['stderr']:.4f}" in log_z  # the log-likelihoods carry log Z's error bar
            verdict, badge = {"reliable": ("reliable", "ok"), "unchecked": ("unchecked", "unchecked")}.get(
                row["verdict"], ("UNRELIABLE", "bad")
            )
            assert f'<span class="badge {badge}">{verdict}</span>' in log_z
    assert '<span class="badge exact">exact</span>' in log_z
    assert "log Z: ais" in sections["timings"] and "updates/s" in sections["timings"]


def test_evaluate_json_out_keeps_stdout_one_object(tempered_run: Path, tmp_path: Path):
    result = invoke(
        "evaluate", tempered_run / "model.safetensors", "--data", "digits", "--methods", "exact",
        "--json", "--out", tmp_path,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed == json.loads((tmp_path / "evaluation.json").read_text(encoding="utf-8"))
    assert f"wrote {tmp_path / 'report.html'}" in result.stderr


def test_unreliable_rows_show_their_reasons(tempered_run: Path, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(tempered_run, run)
    evaluation = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    evaluation["rows"][1].update(reliable=False, warnings=["ESS 3.1 below 10 <b>", "second reason"])
    (run / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")
    assert invoke("report", run).exit_code == 0
    log_z = sections_of((run / "report.html").read_text(encoding="utf-8"))["log-z"]
    method = evaluation["rows"][1]["method"]
    assert f"{method} is UNRELIABLE because:" in log_z
    assert "<li>ESS 3.1 below 10 &lt;b&gt;</li>" in log_z and "<li>second reason</li>" in log_z


def test_unchecked_rows_get_their_own_badge_and_sentence(tempered_run: Path, tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(tempered_run, run)
    evaluation = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    sentence = "the missing-mass witness started from the base, not from data"
    evaluation["rows"][1].update(reliable=False, verdict="unchecked", warnings=[sentence])
    (run / "evaluation.json").write_text(json.dumps(evaluation), encoding="utf-8")
    assert invoke("report", run).exit_code == 0
    log_z = sections_of((run / "report.html").read_text(encoding="utf-8"))["log-z"]
    method = evaluation["rows"][1]["method"]
    assert '<span class="badge unchecked">unchecked</span>' in log_z
    assert f"{method} is unchecked (not reliable):" in log_z and f"<li>{sentence}</li>" in log_z
    assert f"{method} is UNRELIABLE" not in log_z


def test_plain_run_says_what_it_did_not_record(tmp_path: Path):
    out = tmp_path / "cd"
    result = invoke("train", "--data", "digits", "--hidden", "8", "--updates", "20", "--out", out)
    assert result.exit_code == 0, result.output
    sections = sections_of((out / "report.html").read_text(encoding="utf-8"))
    assert "No tempering in this run (algorithm cd)" in sections["tempering"]
    assert "Not recorded in this run: no log Z estimate was saved" in sections["log-z"]
    assert "boltzlab evaluate" in sections["log-z"]
    assert "config.toml" in sections["configuration"] and "RBM 64×8" in sections["configuration"]


def test_report_of_a_bare_folder_draws_samples_and_marks_the_rest_missing(tmp_path: Path):
    """Only a model file: samples are drawn from it; unreadable files become warning lines."""
    bl.RBM(n_visible=16, n_hidden=3, generator=0).save(tmp_path / "model.safetensors")
    (tmp_path / "metrics.csv").write_text("update,time\n0,zero\n", encoding="utf-8")
    (tmp_path / "evaluation.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "summary.md").write_text("# claim\n\n<script>alert(1)</script> held", encoding="utf-8")
    result = invoke("report", tmp_path, "--out", tmp_path / "page.html")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    sections = sections_of(page)
    assert set(SECTION_KEYS) <= set(sections)
    assert (
        "metrics.csv could not be read" in sections["training"]
        and "holds &#x27;zero&#x27;" in sections["training"]
    )
    assert "evaluation.json could not be read" in sections["log-z"]
    assert "Gibbs sweeps from the base, drawn for this report" in sections["samples"]
    assert "Not recorded in this run" in sections["timings"]
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; held" in sections["summary"]


def test_report_refuses_a_missing_directory(tmp_path: Path):
    result = invoke("report", tmp_path / "absent")
    assert result.exit_code == 1
    assert "is not a directory" in result.stderr


def test_render_page_escapes_every_text():
    hostile = '<img src=x onerror="alert(1)">'
    page = render_page(
        ReportPage(
            title=hostile,
            subtitle=(hostile,),
            sections=(
                Section(
                    "a", hostile, (Paragraph(hostile), Table((hostile,), ((hostile,),), caption=hostile))
                ),
                Section("b", "empty", (), missing=hostile),
                Section("c", "image", (Image(b"\x89PNG", hostile),)),
            ),
            footer=hostile,
        )
    )
    assert "<img src=x" not in page and 'onerror="alert' not in page
    assert page.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 13  # every place text goes


def test_metrics_csv_reads_back_the_trainers_records(tmp_path: Path):
    data = bl.data.load("digits").train[:200]
    model = bl.RBM(n_visible=64, n_hidden=5, generator=0)
    result = bl.train(
        model, data, algorithm="pt", algorithm_params={"n_levels": 3}, n_updates=12, batch_size=50,
        log_every=4, track_exact_every=6, generator=0, metrics_path=tmp_path / "metrics.csv",
    )  # fmt: skip
    records = read_metrics(tmp_path / "metrics.csv")
    assert len(records) == len(result.history)
    for read, written in zip(records, result.history, strict=True):
        assert read.update == written.update and read.epoch == written.epoch
        for name in ("learning_rate", "time", "reconstruction_error", "log_z", "train_log_likelihood"):
            assert read.get(name) == written.get(name)
        assert read.extra == {name: value for name, value in written.extra.items() if math.isfinite(value)}


# --------------------------------------------------------------------------- in a browser


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def headless(browser: str, profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
    ]  # fmt: skip
    return subprocess.run([browser, *flags, *arguments], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tempered_run: Path, tmp_path: Path):
    browser = find_chromium()
    if browser is None:
        pytest.skip(
            "no Chromium on PATH (chromium, chromium-browser or google-chrome): apt-get install chromium"
        )
    url = (tempered_run / "report.html").resolve().as_uri()
    screenshot = tmp_path / "report.png"
    shot = headless(
        browser, tmp_path / "profile", f"--screenshot={screenshot}", "--window-size=1200,3000", url
    )
    assert screenshot.is_file(), shot.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)[..., :3]
    assert pixels.shape[:2] == (3000, 1200)
    assert float(pixels.std()) > 0.05, "the screenshot is (nearly) blank"
    colours = np.unique((pixels[::4, ::4] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"only {len(colours)} distinct colours: the page did not render"
    # The header band is the page's dark blue, the body its light grey: CSS was applied.
    assert np.allclose(pixels[5, 600], np.array([0x1F, 0x3A, 0x5F]) / 255, atol=0.02)
    # The DOM after rendering holds every section with its heading, and images that loaded.
    dom = headless(browser, tmp_path / "profile", "--dump-dom", url).stdout
    for key in SECTION_KEYS:
        assert f'<section id="{key}"><h2>' in dom, key
    assert "log Z and log-likelihood</h2>" in dom and "Training curves</h2>" in dom
    assert dom.count('src="data:image/png;base64,') >= 4

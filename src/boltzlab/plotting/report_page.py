"""One self-contained HTML page for a run: what ``boltzlab report RUN_DIR`` writes as ``report.html``.

A page is a :class:`ReportPage` of :class:`Section` s, each a sequence of blocks
(:class:`Paragraph`, :class:`Table`, :class:`Image`, :class:`BulletList`). :func:`render_page`
turns it into one HTML document that needs nothing else: the CSS is in a ``<style>`` element,
every image is a base64 PNG ``data:`` URL, there is no script and no link outside the page,
so it opens the same from a file, a mail attachment or a machine without network. Every
piece of text goes through :func:`html.escape`, so a dataset name or a warning can never
inject markup. A section with no blocks shows its ``missing`` line (e.g. "not recorded in
this run"), so a reader always sees every section and whether it was measured.

:func:`sampler_rates_figure` draws the tempering rates a training run records in its history
(swap acceptance and round trips of PT, level acceptance and bottom occupancy of adaptive ST
and CAST, move acceptance of Trans-SAP; :mod:`boltzlab.training.scheme_steps`).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

from boltzlab.io import write_atomic
from boltzlab.plotting.training import records_of
from boltzlab.training.scheme_steps import PT_METRICS, ST_METRICS, TT_METRICS
from boltzlab.training.state import TrainRecord, TrainResult

__all__ = [
    "SAMPLER_RATE_METRICS",
    "BulletList",
    "Image",
    "Paragraph",
    "ReportPage",
    "Section",
    "Table",
    "has_sampler_rates",
    "render_page",
    "sampler_rates_figure",
    "write_page",
]

# The history's tempering diagnostics, in the order they are drawn.
SAMPLER_RATE_METRICS = (*PT_METRICS, *ST_METRICS, *TT_METRICS)
# Cell texts of a verdict column that get a coloured badge.
_VERDICT_CLASSES = {"reliable": "ok", "exact": "exact", "UNRELIABLE": "bad", "unchecked": "unchecked"}


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph of plain text; ``kind`` ``"note"`` is grey, ``"warning"`` red-bordered."""

    text: str
    kind: str = "plain"


@dataclass(frozen=True, slots=True)
class BulletList:
    """A bulleted list of plain-text items, with an optional lead-in line."""

    items: tuple[str, ...]
    title: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table of text cells.

    Attributes
    ----------
    header : tuple of str
    rows : tuple of tuple of str
        Each row as long as ``header``.
    caption : str, optional
    numeric : tuple of int
        Columns aligned right (numbers).
    verdict_column : int, optional
        Column whose ``reliable`` / ``unchecked`` / ``UNRELIABLE`` / ``exact`` cells are drawn as badges.
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = None
    numeric: tuple[int, ...] = ()
    verdict_column: int | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """A PNG inlined as a ``data:`` URL.

    Attributes
    ----------
    png : bytes
        The PNG file's bytes.
    caption : str
    max_width : int
        Largest width on the page, CSS pixels (the image never grows past its own size).
    """

    png: bytes
    caption: str
    max_width: int = 1000


Block = Paragraph | BulletList | Table | Image


@dataclass(frozen=True, slots=True)
class Section:
    """One ``<section>`` with an ``<h2>``.

    Attributes
    ----------
    key : str
        The section's HTML id (letters, digits and dashes), e.g. ``"training"``.
    title : str
    blocks : tuple of blocks
    missing : str
        Shown instead of the blocks when there are none, e.g. "Not recorded in this run: ...".
    """

    key: str
    title: str
    blocks: tuple[Block, ...]
    missing: str = "Not recorded in this run."


@dataclass(frozen=True, slots=True)
class ReportPage:
    """A whole page: a title, a few subtitle lines, the sections in order, a footer line."""

    title: str
    subtitle: tuple[str, ...]
    sections: tuple[Section, ...]
    footer: str = ""


_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: #1d2430; background: #f4f5f7; margin: 0; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; }
header { background: #1f3a5f; color: #fff; padding: 22px 32px; }
header h1 { margin: 0 0 4px; font-size: 26px; font-weight: 600; }
header p { margin: 2px 0; color: #d5deea; }
nav { margin-top: 12px; }
nav a { color: #fff; margin-right: 16px; text-decoration: none; border-bottom: 1px solid #7f9bc1; }
section { background: #fff; border: 1px solid #dde1e7; border-radius: 8px; padding: 16px 22px;
          margin: 18px 0; }
h2 { font-size: 20px; margin: 0 0 12px; color: #1f3a5f; border-bottom: 2px solid #e3e8ef;
     padding-bottom: 6px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 14px; }
caption { text-align: left; font-weight: 600; padding: 4px 0; color: #3a4556; }
section#configuration table { display: inline-table; margin-right: 28px; vertical-align: top; }
th, td { border: 1px solid #d5dae1; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
tbody tr:nth-child(even) { background: #f8f9fb; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-weight: 600; font-size: 13px; }
.badge.ok { background: #dff3e4; color: #1e6b34; }
.badge.bad { background: #fbe0e0; color: #a12626; }
.badge.exact { background: #e4ebf7; color: #244a86; }
.badge.unchecked { background: #fdf0d5; color: #8a5a00; }
figure { margin: 10px 0 16px; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e6ea; }
figcaption { color: #56606e; font-size: 13px; margin-top: 4px; }
p.note { color: #5c6674; }
p.missing { color: #5c6674; font-style: italic; }
p.warning { border-left: 4px solid #c0392b; padding-left: 10px; }
footer { color: #6b7480; font-size: 13px; text-align: center; margin-top: 24px; }
"""


def _text(value: str) -> str:
    return html.escape(str(value), quote=True)


def _cell(value: str, *, numeric: bool, verdict: bool) -> str:
    css = _VERDICT_CLASSES.get(value) if verdict else None
    inner = f'<span class="badge {css}">{_text(value)}</span>' if css else _text(value)
    return f'<td class="num">{inner}</td>' if numeric else f"<td>{inner}</td>"


def _render_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        css = f' class="{block.kind}"' if block.kind in ("note", "warning") else ""
        return f"<p{css}>{_text(block.text)}</p>"
    if isinstance(block, BulletList):
        title = f"<p>{_text(block.title)}</p>" if block.title else ""
        items = "".join(f"<li>{_text(item)}</li>" for item in block.items)
        return f"{title}<ul>{items}</ul>"
    if isinstance(block, Table):
        caption = f"<caption>{_text(block.caption)}</caption>" if block.caption else ""
        header = "".join(f"<th>{_text(name)}</th>" for name in block.header)
        rows = "".join(
            "<tr>"
            + "".join(
                _cell(value, numeric=index in block.numeric, verdict=index == block.verdict_column)
                for index, value in enumerate(row)
            )
            + "</tr>"
            for row in block.rows
        )
        return f"<table>{caption}<thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"
    if isinstance(block, Image):
        encoded = base64.b64encode(block.png).decode("ascii")
        return (
            f'<figure><img style="max-width: min(100%, {int(block.max_width)}px)" '
            f'src="data:image/png;base64,{encoded}" alt="{_text(block.caption)}">'
            f"<figcaption>{_text(block.caption)}</figcaption></figure>"
        )
    raise TypeError(f"not a report block: {type(block).__name__}")


def render_page(page: ReportPage) -> str:
    """The page as one self-contained HTML document (module docstring)."""
    nav = "".join(f'<a href="#{_text(section.key)}">{_text(section.title)}</a>' for section in page.sections)
    subtitle = "".join(f"<p>{_text(line)}</p>" for line in page.subtitle)
    sections = []
    for section in page.sections:
        body = (
            "".join(_render_block(block) for block in section.blocks)
            if section.blocks
            else f'<p class="missing">{_text(section.missing)}</p>'
        )
        sections.append(f'<section id="{_text(section.key)}"><h2>{_text(section.title)}</h2>{body}</section>')
    footer = f"<footer>{_text(page.footer)}</footer>" if page.footer else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_text(page.title)}</title><style>{_CSS}</style></head>\n"
        f"<body><header><h1>{_text(page.title)}</h1>{subtitle}<nav>{nav}</nav></header>\n"
        f"<main>{''.join(sections)}{footer}</main></body></html>\n"
    )


def write_page(page: ReportPage, path: str | Path) -> Path:
    """Write :func:`render_page` of ``page`` to ``path`` atomically (UTF-8); returns the path."""
    return write_atomic(path, render_page(page).encode("utf-8"))


def _rate_series(records: Sequence[TrainRecord], name: str) -> tuple[list[int], list[float]]:
    points = [(record.update, record.get(name)) for record in records]
    kept = [(update, float(value)) for update, value in points if value is not None and math.isfinite(value)]
    return [update for update, _ in kept], [value for _, value in kept]


def has_sampler_rates(history: TrainResult | Iterable[TrainRecord]) -> bool:
    """Whether any record holds one of :data:`SAMPLER_RATE_METRICS`."""
    records = records_of(history)
    return any(_rate_series(records, name)[0] for name in SAMPLER_RATE_METRICS)


def sampler_rates_figure(history: TrainResult | Iterable[TrainRecord], *, title: str | None = None) -> Figure:
    """The tempering rates of a training run against the update number.

    Rates in [0, 1] (acceptances, occupancy) share the left panel; round trips per step
    (counts, usually far below 1) get the right panel when the run recorded them.
    """
    records = records_of(history)
    rates = [name for name in SAMPLER_RATE_METRICS if name != "round_trips_per_step"]
    with_trips = bool(_rate_series(records, "round_trips_per_step")[0])
    figure = Figure(figsize=(10.0 if with_trips else 5.5, 3.6), layout="constrained")
    axes = figure.subplots(1, 2 if with_trips else 1, squeeze=False)[0]
    for name in rates:
        updates, values = _rate_series(records, name)
        if updates:
            axes[0].plot(
                updates, values, marker="o", markersize=2.5, linewidth=1.2, label=name.replace("_", " ")
            )
    axes[0].set_ylim(0.0, 1.02)
    axes[0].set_xlabel("update")
    axes[0].set_ylabel("rate (moving average)")
    axes[0].set_title("acceptance and occupancy")
    axes[0].grid(alpha=0.3)
    if axes[0].lines:
        axes[0].legend(fontsize="small")
    if with_trips:
        updates, values = _rate_series(records, "round_trips_per_step")
        axes[1].plot(updates, values, color="C3", marker="o", markersize=2.5, linewidth=1.2)
        axes[1].set_xlabel("update")
        axes[1].set_ylabel("round trips per step")
        axes[1].set_title("ladder round trips")
        axes[1].grid(alpha=0.3)
    if title:
        figure.suptitle(title)
    return figure

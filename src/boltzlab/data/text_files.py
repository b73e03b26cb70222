"""Delimited text files (``.csv``, ``.tsv``, ``.txt``, optionally gzip-compressed): one example per line.

What is read (docs/data.md, "Delimited text"):

* one example per line, numbers only (0/1, or grey levels to binarise); blank lines and lines
  starting with ``#`` are skipped;
* the delimiter is detected from the first lines: tab, comma, semicolon, or runs of
  whitespace, whichever splits them into numbers in the same number of columns;
* a first line with no numeric cell is a header and is skipped; so is pandas' default header
  (``0,1,2,...``, or ``,0,1,2,...`` whose empty first cell names an index column, which is
  then dropped: ``DataFrame.to_csv`` writes both);
* a header column named ``label``, ``y`` or ``target`` holds class labels (numbers, or names
  that become 0, 1, ... in sorted order); every other column is a feature.

Numbers are parsed by :func:`numpy.loadtxt`; when it refuses the file, the lines are scanned
again to say which line and column is wrong: ragged rows, a cell that is text, an empty
cell, or a cell that holds another delimiter (the file mixes delimiters). ``.txt`` files whose
lines hold ``index:value`` tokens are svmlight, not delimited text
(:func:`looks_like_svmlight`).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from boltzlab.data.readers import require_nonempty_file
from boltzlab.errors import DataError

__all__ = ["TextData", "read_text"]

_LABEL_COLUMNS = ("label", "y", "target")
# None means runs of whitespace; the order breaks ties (a tab file also splits on whitespace).
_DELIMITERS: tuple[str | None, ...] = ("\t", ",", ";", None)
_DELIMITER_NAMES = {"\t": "tab", ",": "comma", ";": "semicolon", None: "whitespace"}
_SAMPLE_LINES = 50  # lines that decide the delimiter
_SVMLIGHT_TOKEN = re.compile(r"^\d+:\S*$")
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class TextData:
    """The contents of one delimited text file.

    Attributes
    ----------
    inputs : numpy.ndarray, shape (n_examples, n_features), float64
    labels : numpy.ndarray, shape (n_examples,), int64, or None
        From a header column named ``label``, ``y`` or ``target``.
    line_numbers : numpy.ndarray, shape (n_examples,), int64
        The line (from 1) each example was read from, for error messages.
    header : tuple[str, ...] or None
        The names of the feature columns, when the file has a header.
    delimiter : str or None
        The detected delimiter; ``None`` means runs of whitespace.
    """

    inputs: np.ndarray
    labels: np.ndarray | None
    line_numbers: np.ndarray
    header: tuple[str, ...] | None
    delimiter: str | None


def read_text(path: str | os.PathLike[str]) -> TextData:
    """A delimited text file of numbers, one example per line (see the module docstring).

    Parameters
    ----------
    path : str or path-like
        ``.csv``, ``.tsv``, ``.txt`` or any name; gzip compression is recognised by content.

    Returns
    -------
    TextData

    Raises
    ------
    DataError
        One line naming the file and the problem: empty file, no data rows, mixed delimiters,
        ragged rows, a text or empty cell, NaN or infinite values.
    """
    path = Path(path)
    content = _content_lines(path)
    if not content:
        raise DataError(
            f"{path}: no data rows (only blank or '#' comment lines); expected one example per line, "
            "e.g. 0,1,1,0"
        )
    delimiter = _detect_delimiter([line for _, line in content[:_SAMPLE_LINES]])
    first_cells = _split(content[0][1], delimiter)
    header = tuple(first_cells) if _is_header(first_cells, content[0][1]) else None
    rows = content[1:] if header is not None else content
    if not rows:
        raise DataError(f"{path}: only a header line ({', '.join(first_cells)}), no data rows")
    n_columns = len(header) if header is not None else len(_split(rows[0][1], delimiter))
    label_column = _label_column(path, header)
    # pandas' to_csv writes the index as a first column with an empty name; it is not a feature.
    skipped = {0} if header is not None and header[0] == "" and n_columns > 1 else set()
    feature_columns = [j for j in range(n_columns) if j != label_column and j not in skipped]
    if not feature_columns:
        raise DataError(f"{path}: no feature columns, only {', '.join(header or ())}")
    lines = [line for _, line in rows]
    try:
        values = np.loadtxt(
            lines,
            delimiter=delimiter,
            dtype=np.float64,
            ndmin=2,
            comments=None,
            quotechar='"',
            usecols=feature_columns,
        )
    except ValueError:
        values = None
    # usecols turns off loadtxt's own check that every row has the same number of columns.
    if values is None or any(_count_cells(line, delimiter) != n_columns for line in lines):
        _raise_parse_error(path, rows, delimiter, n_columns, header=content[0] if header else None)
    line_numbers = np.array([number for number, _ in rows], dtype=np.int64)
    _require_finite(path, values, line_numbers, feature_columns)
    labels = None
    if label_column is not None:
        labels = _labels(
            np.loadtxt(lines, delimiter=delimiter, dtype=str, ndmin=1, comments=None, usecols=label_column)
        )
    names = tuple(header[j] for j in feature_columns) if header is not None else None
    return TextData(values, labels, line_numbers, names, delimiter)


def require_binary_text(path: Path, data: TextData) -> None:
    """Refuse values other than 0/1 (or ±1, binary data coded as spins, which the readers take
    with −1 as 0), naming the line and column of the first one and the fix."""
    inputs = data.inputs
    if (inputs == -1).any() and ((inputs == -1) | (inputs == 1)).all():
        return
    bad = (inputs != 0) & (inputs != 1)
    if not bad.any():
        return
    row, column = np.argwhere(bad)[0]
    raise DataError(
        f"{path}: line {data.line_numbers[row]}, column {column + 1}: value {inputs[row, column]:g} is not "
        f"0 or 1 (values range from {inputs.min():g} to {inputs.max():g}); for grey levels pass "
        "--binarize threshold|stochastic and --pixel-max MAX (library: binarize=, pixel_max=)"
    )


def looks_like_svmlight(path: Path) -> bool:
    """Whether the first non-blank lines hold svmlight ``index:value`` tokens (after the target)."""
    for line in _first_lines(path, _SAMPLE_LINES):
        tokens = line.split("#", 1)[0].split()
        if any(_SVMLIGHT_TOKEN.match(token) for token in tokens[1:]):
            return True
    return False


def _first_lines(path: Path, limit: int) -> list[str]:
    """Up to ``limit`` non-blank, non-comment lines, read as a stream (a sniff, not a parse: the
    whole file is read only by the reader that is chosen)."""
    require_nonempty_file(path, "a delimited text file (one example per line)")
    with path.open("rb") as probe:
        gzipped = probe.read(2) == _GZIP_MAGIC
    lines: list[str] = []
    try:
        opener = gzip.open if gzipped else open
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as handle:
            for line in handle:
                if line.strip() and not line.lstrip().startswith("#"):
                    lines.append(line)
                    if len(lines) >= limit:
                        break
    except (OSError, EOFError, zlib.error) as error:
        raise DataError(f"{path}: unreadable ({error}); write or fetch the file again") from None
    return lines


def _content_lines(path: Path, limit: int | None = None) -> list[tuple[int, str]]:
    """(line number from 1, text) of every line that is neither blank nor a ``#`` comment."""
    require_nonempty_file(path, "a delimited text file (one example per line)")
    raw = path.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as error:
            raise DataError(f"{path}: broken gzip stream ({error}); write or fetch the file again") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}: not UTF-8 text (byte {error.start}); expected a delimited text file of numbers"
        ) from None
    content = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            content.append((number, line))
            if limit is not None and len(content) >= limit:
                break
    return content


def _split(line: str, delimiter: str | None) -> list[str]:
    return [cell.strip().strip('"').strip() for cell in line.split(delimiter)]


def _count_cells(line: str, delimiter: str | None) -> int:
    return len(line.split()) if delimiter is None else line.count(delimiter) + 1


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return "_" not in cell  # float() accepts 1_000, numpy does not


def _is_header(cells: list[str], line: str) -> bool:
    """No numeric cell, or pandas' default column names 0, 1, ... (after an empty index name).

    A line of numbers under another delimiter is data written with the wrong delimiter, not a header.
    """
    if not any(_is_number(cell) for cell in cells):
        return not any(all(_is_number(cell) for cell in _split(line, other)) for other in _DELIMITERS)
    names = cells[1:] if cells[0] == "" else cells
    return len(names) >= 3 and names == [str(index) for index in range(len(names))]


def _detect_delimiter(sample: list[str]) -> str | None:
    """The delimiter that splits the sample's data lines into numbers, the same count on each."""
    data_lines = sample[1:] or sample  # the first line may be a header
    present = [d for d in _DELIMITERS if d is None or any(d in line for line in sample)]

    def score(delimiter: str | None) -> tuple[float, bool, int]:
        splits = [_split(line, delimiter) for line in data_lines]
        numeric = sum(all(_is_number(cell) for cell in cells) for cells in splits) / len(splits)
        counts = {len(cells) for cells in splits}
        return numeric, len(counts) == 1, max(counts)

    scores = [score(d) for d in present]
    return present[scores.index(max(scores))]


def _label_column(path: Path, header: tuple[str, ...] | None) -> int | None:
    if header is None:
        return None
    found = [j for j, name in enumerate(header) if name.strip().lower() in _LABEL_COLUMNS]
    if len(found) > 1:
        raise DataError(
            f"{path}: the header names several label columns ({', '.join(header[j] for j in found)}); "
            f"keep one column named {' or '.join(_LABEL_COLUMNS)}"
        )
    return found[0] if found else None


def _labels(cells: np.ndarray) -> np.ndarray:
    """Class labels: non-negative integers as written; other numbers, or names, become 0, 1, ...
    in sorted order (numeric order for numbers, as svmlight's -1/+1 become 0/1)."""
    cells = np.char.strip(np.char.strip(cells.astype(str)), '"')
    if all(_is_number(cell) for cell in cells):
        values = cells.astype(np.float64)
        if np.isfinite(values).all() and (values == np.round(values)).all() and values.min() >= 0:
            return values.astype(np.int64)
        return np.unique(values, return_inverse=True)[1].reshape(-1).astype(np.int64)
    return np.unique(cells, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _describe(delimiter: str | None) -> str:
    return _DELIMITER_NAMES[delimiter] + ("" if delimiter is None else f" {delimiter!r}")


def _raise_parse_error(
    path: Path,
    rows: Sequence[tuple[int, str]],
    delimiter: str | None,
    n_columns: int,
    *,
    header: tuple[int, str] | None,
) -> None:
    """Find the first bad line (numpy's message names neither the line nor the fix) and raise."""
    reference_number, reference_text = header if header is not None else rows[0]
    reference = f"the header (line {reference_number})" if header is not None else f"line {reference_number}"
    for number, line in rows:
        cells = _split(line, delimiter)
        if len(cells) != n_columns:
            # One column on either side, with another delimiter inside it: the file mixes delimiters.
            if len(cells) == 1 and (other := _other_delimiter(line, delimiter)):
                mixed = f"line {number} {line.strip()[:40]!r} is separated by {other} but {reference} by"
            elif n_columns == 1 and (
                other := _other_delimiter(reference_text, delimiter, numbers=header is None)
            ):
                mixed = f"{reference} {reference_text.strip()[:40]!r} is separated by {other} but line {number} by"
            else:
                raise DataError(
                    f"{path}: ragged rows: line {number} has {len(cells)} columns but {reference} has "
                    f"{n_columns}; every row needs the same number of values"
                )
            raise DataError(
                f"{path}: wrong delimiter: {mixed} {_describe(delimiter)}; use one delimiter throughout"
            )
        for column, cell in enumerate(cells, start=1):
            if cell == "":
                raise DataError(
                    f"{path}: line {number}, column {column} is empty; fill it in or drop the row"
                )
            if _is_number(cell):
                continue
            if other := _other_delimiter(cell, delimiter):
                raise DataError(
                    f"{path}: wrong delimiter: line {number}, column {column} holds {cell[:40]!r}, separated by "
                    f"{other}, but the file by {_describe(delimiter)}; use one delimiter throughout"
                )
            raise DataError(
                f"{path}: line {number}, column {column}: {cell[:40]!r} is not a number; data rows must "
                "hold numbers only (only a first line without numbers is taken as a header)"
            )
    raise DataError(f"{path}: not a delimited text file of numbers that numpy.loadtxt can read")


def _other_delimiter(text: str, delimiter: str | None, *, numbers: bool = True) -> str:
    """The name of another delimiter that splits ``text`` into several cells, else ``""``.

    With ``numbers`` (a data cell) the cells must all be numbers: text that merely contains a
    space or a comma (a spreadsheet formula such as ``=cmd|' /C calc'!A0``) is text, not
    numbers under another delimiter. A header's cells are names.
    """
    for other in _DELIMITERS:
        pieces = [piece for piece in text.strip().split(other) if piece.strip()]
        if (
            other != delimiter
            and len(pieces) > 1
            and (not numbers or all(_is_number(p.strip()) for p in pieces))
        ):
            return _describe(other)
    return ""


def _require_finite(path: Path, values: np.ndarray, line_numbers: np.ndarray, columns: list[int]) -> None:
    finite = np.isfinite(values)
    if finite.all():
        return
    row, column = np.argwhere(~finite)[0]
    raise DataError(
        f"{path}: line {line_numbers[row]}, column {columns[column] + 1} is {values[row, column]} "
        "(NaN or infinite); drop or repair that row"
    )

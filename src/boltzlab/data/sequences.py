"""Aligned sequences for categorical (Potts) units: alphabets, aligned FASTA and plain lines.

An alignment is ``N`` sequences of the same length ``L`` over an alphabet of ``q`` symbols,
held as symbol indices, shape ``(N, L)``, int64, each in ``0 … q−1`` (docs/data.md,
"Aligned sequences"). What is read:

* **Aligned FASTA** (``.fasta``, ``.fa``, ``.faa``, ``.afa``, ``.a2m``, ``.aln`` and their
  ``.gz``): a ``>name`` line, then the sequence on one or more lines. As in the A2M
  convention of aligned-FASTA readers (HMMER, hhblits, the DCA codes), upper-case letters and
  ``-`` are aligned columns, while lower-case letters and ``.`` are insertions relative to the
  alignment and are dropped; after that every sequence must have the same length.
* **One sequence a line** (:func:`read_sequence_lines`): blank lines and ``#`` comments skipped.

A symbol outside the alphabet is refused with its line and column (column in the line as
written, counting from 1), unless ``unknown="gap"`` maps it to the gap, as some DCA codes do
with ``X``, ``B`` and ``Z``. Nothing here imports torch beyond building the final tensor.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from boltzlab.data.readers import require_nonempty_file
from boltzlab.errors import DataError

__all__ = [
    "ALPHABETS",
    "Alignment",
    "Alphabet",
    "get_alphabet",
    "read_fasta",
    "read_sequence_lines",
]

FASTA_SUFFIXES = (".fasta", ".fa", ".faa", ".afa", ".a2m", ".aln")

_NOT_A_SYMBOL = 255  # lookup-table entry for bytes outside the alphabet
_INSERT = 254  # lookup-table entry for insert-state bytes (lower case, '.'), dropped


@dataclass(frozen=True, slots=True)
class Alphabet:
    """The ``q`` symbols of a categorical unit, in index order.

    Attributes
    ----------
    name : str
        ``"protein"``, ``"rna"``, ``"dna"`` or ``"custom"``.
    symbols : str
        One character per state; index ``k`` is ``symbols[k]``. Letters are matched in upper
        case when the alphabet has no lower-case symbol of its own.
    gap : str or None
        The gap symbol (``"-"``), or None when the alphabet has none.
    """

    name: str
    symbols: str
    gap: str | None = "-"

    def __post_init__(self) -> None:
        if len(self.symbols) < 2:
            raise DataError(f"an alphabet needs at least 2 symbols, got {self.symbols!r}")
        if len(set(self.symbols)) != len(self.symbols):
            raise DataError(f"the alphabet {self.symbols!r} repeats a symbol")
        if any(
            not symbol.isascii() or not symbol.isprintable() or symbol.isspace() for symbol in self.symbols
        ):
            raise DataError(f"the alphabet {self.symbols!r} must be printable ASCII without spaces")
        if self.gap is not None and self.gap not in self.symbols:
            raise DataError(f"the gap {self.gap!r} is not one of the alphabet's symbols {self.symbols!r}")

    @property
    def q(self) -> int:
        """Number of states."""
        return len(self.symbols)

    @property
    def has_lower_case(self) -> bool:
        return any(symbol.islower() for symbol in self.symbols)

    def decode(self, indices: Tensor) -> list[str]:
        """Sequences as strings; ``indices`` of shape ``(N, L)`` (any integer dtype)."""
        table = np.frombuffer(self.symbols.encode("ascii"), dtype=np.uint8)
        rows = table[indices.detach().cpu().numpy().astype(np.int64)]
        return [row.tobytes().decode("ascii") for row in rows]


#: The built-in alphabets: 20 amino acids in alphabetical one-letter order and the gap (21
#: symbols, the order of PGM and most DCA codes); RNA and DNA nucleotides and the gap.
ALPHABETS: dict[str, Alphabet] = {
    "protein": Alphabet("protein", "ACDEFGHIKLMNPQRSTVWY-"),
    "rna": Alphabet("rna", "ACGU-"),
    "dna": Alphabet("dna", "ACGT-"),
}


def get_alphabet(alphabet: str | Alphabet) -> Alphabet:
    """A built-in alphabet by name, an :class:`Alphabet` as given, or ``"custom:SYMBOLS"``.

    ``"custom:ABC-"`` is an alphabet of the symbols ``A``, ``B``, ``C`` and the gap ``-``
    (a gap only when ``-`` is among them).
    """
    if isinstance(alphabet, Alphabet):
        return alphabet
    if not isinstance(alphabet, str):
        raise DataError(f"alphabet must be a name or an Alphabet, got {type(alphabet).__name__}")
    if alphabet.startswith("custom:"):
        symbols = alphabet.removeprefix("custom:")
        return Alphabet("custom", symbols, "-" if "-" in symbols else None)
    key = alphabet.lower()
    if key not in ALPHABETS:
        raise DataError(
            f"unknown alphabet {alphabet!r}; choose one of {', '.join(ALPHABETS)}, or give your own "
            "symbols as 'custom:SYMBOLS' (e.g. 'custom:ABC-')"
        )
    return ALPHABETS[key]


@dataclass(frozen=True, slots=True)
class Alignment:
    """Aligned sequences as symbol indices.

    Attributes
    ----------
    sequences : Tensor, shape (N, L), int64
        Symbol indices in ``0 … q−1``.
    names : tuple of str
        One name per sequence (the FASTA header without ``>``; ``line N`` for plain lines).
    alphabet : Alphabet
    source : str
        Where the sequences came from (a path), for messages.
    """

    sequences: Tensor
    names: tuple[str, ...]
    alphabet: Alphabet
    source: str = ""

    @property
    def n_sequences(self) -> int:
        return self.sequences.shape[0]

    @property
    def length(self) -> int:
        """Number of aligned columns ``L``."""
        return self.sequences.shape[1]

    def one_hot(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """One-hot encoding, shape ``(N, L·q)``: site ``i``'s state ``a`` at column ``i·q + a``."""
        q = self.alphabet.q
        flat = torch.nn.functional.one_hot(self.sequences, q)
        return flat.reshape(self.n_sequences, self.length * q).to(dtype)

    def as_strings(self) -> list[str]:
        return self.alphabet.decode(self.sequences)


def _lookup(alphabet: Alphabet, *, inserts: bool, unknown: Literal["refuse", "gap"]) -> np.ndarray:
    """Byte → state index table (:data:`_INSERT` for dropped bytes, :data:`_NOT_A_SYMBOL` else)."""
    fill = _NOT_A_SYMBOL
    if unknown == "gap":
        if alphabet.gap is None:
            raise DataError(f"unknown='gap' needs an alphabet with a gap; {alphabet.symbols!r} has none")
        fill = alphabet.symbols.index(alphabet.gap)
    table = np.full(256, fill, dtype=np.uint8)
    fold = not alphabet.has_lower_case
    for index, symbol in enumerate(alphabet.symbols):
        table[ord(symbol)] = index
        if fold and symbol.isalpha():
            table[ord(symbol.lower())] = index
    if inserts:
        if alphabet.has_lower_case or "." in alphabet.symbols:
            raise DataError(
                f"the alphabet {alphabet.symbols!r} uses lower case or '.', which aligned FASTA reserves "
                "for insertions; pass inserts=False to read them as symbols"
            )
        for byte in range(ord("a"), ord("z") + 1):
            table[byte] = _INSERT
        table[ord(".")] = _INSERT
    return table


def _open_text(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="ascii", errors="strict", newline=None) as stream:
            yield from stream
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}: byte {error.start} of a line is not ASCII ({error.object[error.start : error.start + 1]!r}); "
            "sequence files hold ASCII letters and gaps"
        ) from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise DataError(
            f"{path}: cannot be read as {'gzip-compressed ' if opener is gzip.open else ''}text ({error})"
        ) from None


def _encode(
    pieces: list[tuple[int, int, str]], table: np.ndarray, alphabet: Alphabet, path: Path, name: str
) -> np.ndarray:
    """One sequence's state indices; ``pieces`` are (line number, offset in line, text) parts."""
    mapping = table.tobytes()
    inserts = bytes(np.flatnonzero(table == _INSERT).astype(np.uint8))
    codes = []
    for line_number, offset, text in pieces:
        # bytes.translate maps and drops in C: a few µs per line, not a numpy call per line.
        mapped = text.encode("ascii").translate(mapping, inserts)
        if _NOT_A_SYMBOL in mapped:
            column = next(i for i, byte in enumerate(text.encode("ascii")) if table[byte] == _NOT_A_SYMBOL)
            raise DataError(
                f"{path}: line {line_number}, column {offset + column + 1} ({name}): {text[column]!r} is not in "
                f"the {alphabet.name} alphabet ({alphabet.symbols}); fix the file, choose another alphabet, "
                "or read unknown symbols as gaps (unknown='gap'; on the command line --unknown-as-gap)"
            )
        codes.append(mapped)
    return np.frombuffer(b"".join(codes), dtype=np.uint8)


def _alignment(
    rows: list[np.ndarray], names: list[str], starts: list[int], alphabet: Alphabet, path: Path
) -> Alignment:
    if not rows:
        raise DataError(f"{path}: holds no sequences")
    length = rows[0].size
    for row, name, start in zip(rows, names, starts, strict=True):
        if row.size != length:
            raise DataError(
                f"{path}: line {start} ({name}): {row.size} aligned columns, but the first sequence has "
                f"{length}; an alignment's sequences all have the same length once insertions "
                "(lower case and '.') are dropped"
            )
    if length == 0:
        raise DataError(f"{path}: the sequences have no aligned columns (all lower case or '.')")
    sequences = torch.from_numpy(np.stack(rows).astype(np.int64))
    return Alignment(sequences=sequences, names=tuple(names), alphabet=alphabet, source=str(path))


def read_fasta(
    path: str | Path,
    alphabet: str | Alphabet = "protein",
    *,
    inserts: bool = True,
    unknown: Literal["refuse", "gap"] = "refuse",
) -> Alignment:
    """Read an aligned FASTA file (module docstring), optionally gzip-compressed.

    Parameters
    ----------
    path : str or Path
    alphabet : str or Alphabet, default "protein"
        ``"protein"`` (21 symbols with the gap), ``"rna"``, ``"dna"``, ``"custom:SYMBOLS"`` or an
        :class:`Alphabet`.
    inserts : bool, default True
        Drop lower-case letters and ``.`` (insert states). False reads them as symbols.
    unknown : {"refuse", "gap"}, default "refuse"
        What a symbol outside the alphabet does: a :class:`DataError` naming its line and
        column, or the gap.

    Returns
    -------
    Alignment
    """
    path = Path(path)
    require_nonempty_file(path, "an aligned FASTA file ('>name' lines, each followed by its sequence)")
    chosen = get_alphabet(alphabet)
    table = _lookup(chosen, inserts=inserts, unknown=unknown)
    rows: list[np.ndarray] = []
    names: list[str] = []
    starts: list[int] = []
    pieces: list[tuple[int, int, str]] = []
    for line_number, line in enumerate(_open_text(path), start=1):
        text = line.rstrip("\r\n")
        if text.startswith(">"):
            if names:
                rows.append(_encode(pieces, table, chosen, path, names[-1]))
            names.append(text.lstrip(">").strip() or f"sequence {len(names) + 1}")
            starts.append(line_number)
            pieces = []
            continue
        stripped = text.strip()
        if not stripped or stripped.startswith(";"):  # ';' comments: the original FASTA format
            continue
        if not names:
            raise DataError(
                f"{path}: line {line_number}: sequence text before the first '>name' line; is this FASTA? "
                "(files with one sequence a line are read by read_sequence_lines)"
            )
        pieces.append((line_number, len(text) - len(text.lstrip()), stripped))
    if names:
        rows.append(_encode(pieces, table, chosen, path, names[-1]))
    return _alignment(rows, names, starts, chosen, path)


def read_sequence_lines(
    path: str | Path,
    alphabet: str | Alphabet = "protein",
    *,
    inserts: bool = True,
    unknown: Literal["refuse", "gap"] = "refuse",
) -> Alignment:
    """Read aligned sequences written one a line (blank lines and ``#`` comments skipped).

    Same parameters and rules as :func:`read_fasta`; each sequence is named ``line N``.
    """
    path = Path(path)
    require_nonempty_file(path, "aligned sequences, one a line")
    chosen = get_alphabet(alphabet)
    table = _lookup(chosen, inserts=inserts, unknown=unknown)
    rows, names, starts = [], [], []
    for line_number, line in enumerate(_open_text(path), start=1):
        text = line.rstrip("\r\n")
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith(">"):
            raise DataError(f"{path}: line {line_number} is a FASTA header; read this file with read_fasta")
        name = f"line {line_number}"
        rows.append(
            _encode([(line_number, len(text) - len(text.lstrip()), stripped)], table, chosen, path, name)
        )
        names.append(name)
        starts.append(line_number)
    return _alignment(rows, names, starts, chosen, path)

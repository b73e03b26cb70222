"""What ``boltzlab sample --out FILE`` writes, chosen by the file's extension.

* ``.png``: the picture, one row per chain and a sample every ``--keep-every`` sweeps left to
  right (:func:`boltzlab.plotting.chain_strip_figure`).
* ``.npy``: the samples themselves, ``uint8`` 0/1 of shape ``(n_kept, n_chains, n_visible)``:
  the layout of :attr:`boltzlab.sampling.SampleResult.samples` (axis 0 is time, axis 1 the
  chain), read back with ``numpy.load``.
* ``.npz``: the same array as ``samples``, with ``sweeps`` (the sweep after which each sample
  was kept, burn-in included) and ``chains`` (each chain's index), so the file says what its
  axes are.
* ``.csv``: one line per sample, ``chain,sweep,v0,v1,...``, chain by chain and in time within
  a chain, under a header line: for a spreadsheet or a language without a NumPy reader.
* ``.fasta`` (a Potts RBM's samples): one record per sample, chain by chain and in time
  within a chain, ``>sample K chain=C sweep=S`` and the sequence in the model's alphabet on one
  line (:func:`write_fasta`): aligned FASTA that :func:`boltzlab.data.read_fasta` reads back.

For a Potts RBM the ``.npy``, ``.npz`` and ``.csv`` files hold symbol indices (one per site,
``0 … q−1``, the alphabet's order) instead of its one-hot units, so their last axis is the
``L`` sites. ``--format`` names the format when the file name does not (:func:`resolve_format`).
Anything else is refused before a single sweep runs (:func:`check_out_path`), with the
extensions accepted, rather than written in a format its name does not announce: ``--out
s.npy`` used to hold a PNG. Every file is written atomically (:func:`boltzlab.io.write_atomic`).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from torch import Tensor

from boltzlab.data.sequences import Alphabet
from boltzlab.errors import ValidationError
from boltzlab.io import write_atomic

__all__ = [
    "SAMPLE_FORMATS",
    "check_out_path",
    "kept_sweeps",
    "resolve_format",
    "write_fasta",
    "write_samples",
]

#: Extension → what is written there (the order of the help and of the error message).
SAMPLE_FORMATS = {
    ".png": "the picture",
    ".npy": "the 0/1 samples, (n_kept, n_chains, n_visible) uint8",
    ".npz": "samples, sweeps, chains",
    ".csv": "chain,sweep,v0,v1,... per line",
    ".fasta": "the sequences, in the model's alphabet (a Potts RBM)",
}
# Other names of the formats (FASTA's usual extensions).
_ALIASES = {".fa": ".fasta", ".faa": ".fasta", ".afa": ".fasta"}


def check_out_path(path: Path) -> str:
    """The format of ``--out path`` (its lower-cased extension), or one line naming those accepted."""
    suffix = path.suffix.lower()
    suffix = _ALIASES.get(suffix, suffix)
    if suffix not in SAMPLE_FORMATS:
        shown = f"cannot write {suffix!r} files" if suffix else "no extension to tell the format by"
        raise ValidationError(
            f"--out {path}: {shown}; sample writes .png (the picture), .npy, .npz or .csv (the samples "
            "themselves) or .fasta (a Potts RBM's sequences); or name the format with --format"
        )
    return suffix


def resolve_format(out: Path, out_given: bool, format_name: str | None) -> tuple[Path, str]:
    """``(path, format)`` from ``--out`` and ``--format``.

    Without ``--format`` the extension decides (:func:`check_out_path`). With it, ``--out``
    defaults to ``samples.<format>``; an ``--out`` whose extension names another format is
    refused, and one whose extension names none is written in the format asked for.
    """
    if format_name is None:
        return out, check_out_path(out)
    wanted = "." + format_name.lower().lstrip(".")
    if wanted not in SAMPLE_FORMATS:
        raise ValidationError(
            f"--format must be one of {', '.join(suffix[1:] for suffix in SAMPLE_FORMATS)}, got {format_name!r}"
        )
    if not out_given:
        return out.with_suffix(wanted), wanted
    suffix = _ALIASES.get(out.suffix.lower(), out.suffix.lower())
    if suffix in SAMPLE_FORMATS and suffix != wanted:
        raise ValidationError(
            f"--format {format_name} but --out {out} names {suffix}; give one of them, or make them agree"
        )
    return out, wanted


def kept_sweeps(n_kept: int, *, keep_every: int, burn_in: int) -> np.ndarray:
    """The sweep after which each kept sample was taken, burn-in included: the sampler keeps
    the state after every ``keep_every``-th sweep past the burn-in (:func:`boltzlab.sample`)."""
    return burn_in + keep_every * np.arange(1, n_kept + 1, dtype=np.int64)


def write_fasta(indices: Tensor, alphabet: Alphabet, path: Path, *, keep_every: int, burn_in: int) -> Path:
    """Write sampled sequences as aligned FASTA; returns the path.

    Parameters
    ----------
    indices : Tensor, shape (n_kept, n_chains, L)
        Symbol indices (``PottsRBM.to_indices`` of the kept samples).
    alphabet : Alphabet
        The model's: index ``k`` is written as ``alphabet.symbols[k]``.
    path : Path
    keep_every, burn_in : int
        As given to the sampler: each record names the sweep its sample was kept after.
    """
    n_kept, n_chains, length = indices.shape
    sweeps = kept_sweeps(n_kept, keep_every=keep_every, burn_in=burn_in)
    by_chain = indices.detach().cpu().permute(1, 0, 2).reshape(n_chains * n_kept, length)
    lines = []
    for number, sequence in enumerate(alphabet.decode(by_chain)):
        chain, kept = divmod(number, n_kept)
        lines.append(f">sample {number + 1} chain={chain} sweep={int(sweeps[kept])}\n{sequence}\n")
    return write_atomic(path, "".join(lines).encode("ascii"))


def write_samples(
    samples: Tensor, path: Path, *, keep_every: int, burn_in: int, out_format: str | None = None
) -> Path:
    """Write ``samples`` (shape ``(n_kept, n_chains, n_visible)``, 0/1 or ±1 spins, or symbol
    indices of shape ``(n_kept, n_chains, L)``) as ``.npy``, ``.npz`` or ``.csv`` by ``out_format``
    (default ``path``'s extension; module docstring); returns the path."""
    values = samples.detach().cpu()
    states = values.numpy().astype(np.int8 if bool((values < 0).any()) else np.uint8)
    n_kept, n_chains, n_visible = states.shape
    sweeps = kept_sweeps(n_kept, keep_every=keep_every, burn_in=burn_in)
    suffix = out_format if out_format is not None else check_out_path(path)
    buffer = io.BytesIO()
    if suffix == ".npy":
        np.save(buffer, states, allow_pickle=False)
    elif suffix == ".npz":
        np.savez_compressed(buffer, samples=states, sweeps=sweeps, chains=np.arange(n_chains, dtype=np.int64))
    elif suffix == ".csv":
        # Chain by chain: (n_chains, n_kept, 2 + n_visible) rows of integers.
        rows = np.empty((n_chains, n_kept, 2 + n_visible), dtype=np.int64)
        rows[:, :, 0] = np.arange(n_chains)[:, None]
        rows[:, :, 1] = sweeps[None, :]
        rows[:, :, 2:] = states.transpose(1, 0, 2)
        header = ",".join(["chain", "sweep", *(f"v{unit}" for unit in range(n_visible))])
        text = io.StringIO()
        np.savetxt(text, rows.reshape(-1, 2 + n_visible), fmt="%d", delimiter=",", header=header, comments="")
        buffer.write(text.getvalue().encode("ascii"))
    else:
        raise ValidationError(
            f"--out {path}: write_samples writes .npy, .npz or .csv; .png is a figure and .fasta sequences (write_fasta)"
        )
    return write_atomic(path, buffer.getvalue())

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

Anything else is refused before a single sweep runs (:func:`check_out_path`), with the
extensions accepted, rather than written in a format its name does not announce: ``--out
s.npy`` used to hold a PNG. Every file is written atomically (:func:`boltzlab.io.write_atomic`).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from torch import Tensor

from boltzlab.errors import ValidationError
from boltzlab.io import write_atomic

__all__ = ["SAMPLE_FORMATS", "check_out_path", "kept_sweeps", "write_samples"]

#: Extension → what is written there (the order of the help and of the error message).
SAMPLE_FORMATS = {
    ".png": "the picture",
    ".npy": "the 0/1 samples, (n_kept, n_chains, n_visible) uint8",
    ".npz": "samples, sweeps, chains",
    ".csv": "chain,sweep,v0,v1,... per line",
}


def check_out_path(path: Path) -> str:
    """The format of ``--out path`` (its lower-cased extension), or one line naming those accepted."""
    suffix = path.suffix.lower()
    if suffix not in SAMPLE_FORMATS:
        shown = f"cannot write {suffix!r} files" if suffix else "no extension to tell the format by"
        raise ValidationError(
            f"--out {path}: {shown}; sample writes .png (the picture), .npy, .npz or .csv (the samples themselves)"
        )
    return suffix


def kept_sweeps(n_kept: int, *, keep_every: int, burn_in: int) -> np.ndarray:
    """The sweep after which each kept sample was taken, burn-in included: the sampler keeps
    the state after every ``keep_every``-th sweep past the burn-in (:func:`boltzlab.sample`)."""
    return burn_in + keep_every * np.arange(1, n_kept + 1, dtype=np.int64)


def write_samples(samples: Tensor, path: Path, *, keep_every: int, burn_in: int) -> Path:
    """Write ``samples`` (shape ``(n_kept, n_chains, n_visible)``, 0/1) as ``.npy``, ``.npz``
    or ``.csv`` by ``path``'s extension (module docstring); returns the path."""
    states = samples.detach().cpu().numpy().astype(np.uint8)
    n_kept, n_chains, n_visible = states.shape
    sweeps = kept_sweeps(n_kept, keep_every=keep_every, burn_in=burn_in)
    suffix = check_out_path(path)
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
        raise ValidationError(f"--out {path}: write_samples writes .npy, .npz or .csv; .png is a figure")
    return write_atomic(path, buffer.getvalue())

"""Aligned sequences: FASTA and one-a-line readers, alphabets, sequence weights, homology splits.

Properties checked: aligned FASTA is read as A2M readers do (multi-line records, lower case and
'.' insertions dropped, '>>name' headers), gzip too; every built-in and a custom alphabet map
symbols to their indices and back; an unknown symbol is refused with its line and column (or
read as a gap on request); ragged alignments, text before the first header and headers in a
one-a-line file are refused by line. Sequence weights equal a brute-force count of neighbours
within the identity (θ·L rounded as documented), whatever the block size; a homology split
leaves no test sequence within the identity of a training one, is reproducible from its seed,
and refuses when one group holds everything. The real alignments in ../shared/data/proteins
read with their documented shapes.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from boltzlab.data.sequence_weights import (
    effective_number,
    homology_split,
    identity_neighbours,
    sequence_weights,
)
from boltzlab.data.sequences import ALPHABETS, Alphabet, get_alphabet, read_fasta, read_sequence_lines
from boltzlab.errors import DataError


def _write(tmp_path: Path, text: str, name: str = "family.fasta") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_fasta_records_span_lines_and_insertions_are_dropped(tmp_path):
    path = _write(
        tmp_path,
        ">>S1 first\nAC-D\nEF\n\n>S2\nac..AC-\n.DEFg\n; a comment in old FASTA\n>S3\n  ACDDEF  \n",
    )
    alignment = read_fasta(path)
    assert alignment.names == ("S1 first", "S2", "S3")
    assert alignment.as_strings() == ["AC-DEF", "AC-DEF", "ACDDEF"]
    protein = ALPHABETS["protein"].symbols
    assert alignment.sequences[0].tolist() == [protein.index(s) for s in "AC-DEF"]
    assert alignment.sequences.dtype == torch.int64 and alignment.length == 6 and alignment.n_sequences == 3


def test_gzip_fasta_reads_the_same(tmp_path):
    text = ">a\nACGU\n>b\nA-GU\n"
    plain = read_fasta(_write(tmp_path, text, "x.fasta"), "rna")
    with gzip.open(tmp_path / "x.fasta.gz", "wt") as stream:
        stream.write(text)
    packed = read_fasta(tmp_path / "x.fasta.gz", "rna")
    assert torch.equal(plain.sequences, packed.sequences) and packed.as_strings() == ["ACGU", "A-GU"]


@pytest.mark.parametrize(
    ("alphabet", "q", "text"),
    [
        ("protein", 21, "ACDEFGHIKLMNPQRSTVWY-"),
        ("rna", 5, "ACGU-"),
        ("dna", 5, "ACGT-"),
        ("custom:01-", 3, "0-1"),
    ],
)
def test_alphabets_map_symbols_to_indices_and_back(tmp_path, alphabet, q, text):
    chosen = get_alphabet(alphabet)
    assert chosen.q == q
    alignment = read_fasta(
        _write(tmp_path, f">x\n{text}\n"), alphabet, inserts=not alphabet.startswith("custom")
    )
    assert alignment.sequences[0].tolist() == [chosen.symbols.index(s) for s in text]
    assert alignment.as_strings() == [text]
    one_hot = alignment.one_hot()
    assert one_hot.shape == (1, len(text) * q) and one_hot.sum() == len(text)


def test_an_unknown_symbol_is_refused_with_line_and_column(tmp_path):
    path = _write(tmp_path, ">a\nACDE\n>b\nAC\n  DX\n")
    with pytest.raises(DataError, match=r"line 5, column 4 \(b\): 'X' is not in the protein alphabet"):
        read_fasta(path)
    gapped = read_fasta(path, unknown="gap")
    assert gapped.as_strings() == ["ACDE", "ACD-"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (">a\nACDE\n>b\nACD\n", r"line 3 \(b\): 3 aligned columns, but the first sequence has 4"),
        ("ACDE\n>b\nACDE\n", r"line 1: sequence text before the first '>name' line"),
        (">a\nacde\n", "no aligned columns"),
        ("# nothing\n", "sequence text before|no sequences"),
    ],
)
def test_malformed_fasta_is_refused_by_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        read_fasta(_write(tmp_path, text))


def test_alphabets_are_checked():
    with pytest.raises(DataError, match="repeats a symbol"):
        Alphabet("custom", "AAB")
    with pytest.raises(DataError, match="unknown alphabet 'amino'"):
        get_alphabet("amino")
    with pytest.raises(DataError, match="gap '-' is not one of"):
        Alphabet("custom", "AB", "-")


def test_one_sequence_a_line(tmp_path):
    path = _write(tmp_path, "# header comment\nACGT\n\nA-GT\n", "seqs.txt")
    alignment = read_sequence_lines(path, "dna")
    assert alignment.names == ("line 2", "line 4") and alignment.as_strings() == ["ACGT", "A-GT"]
    with pytest.raises(DataError, match="line 1 is a FASTA header"):
        read_sequence_lines(_write(tmp_path, ">a\nACGT\n", "f.txt"), "dna")


def _random_alignment(n: int, length: int, q: int, seed: int) -> torch.Tensor:
    """Families of mutated copies of a few ancestors, so that identities spread over [0, 1]."""
    rng = np.random.default_rng(seed)
    ancestors = rng.integers(0, q, size=(4, length))
    rows = ancestors[rng.integers(0, 4, size=n)].copy()
    mutate = rng.random((n, length)) < rng.uniform(0.0, 0.5, size=(n, 1))
    rows[mutate] = rng.integers(0, q, size=int(mutate.sum()))
    return torch.from_numpy(rows)


def _identities(sequences: torch.Tensor) -> np.ndarray:
    array = sequences.numpy()
    return (array[:, None, :] == array[None, :, :]).mean(-1)


@pytest.mark.parametrize("identity", [0.5, 0.8, 0.9, 1.0])
@pytest.mark.parametrize("block", [None, 1, 7])
def test_weights_equal_a_brute_force_count(identity, block):
    sequences = _random_alignment(60, 30, 5, seed=1)
    expected = (_identities(sequences) >= identity - 1e-12).sum(1)
    assert torch.equal(identity_neighbours(sequences, 5, identity, block=block), torch.from_numpy(expected))
    weights = sequence_weights(sequences, 5, identity, block=block)
    assert weights.dtype == torch.float64
    assert torch.allclose(weights, torch.from_numpy(1.0 / expected))
    assert effective_number(weights) == pytest.approx(float((1.0 / expected).sum()))


def test_identity_threshold_counts_exact_fractions():
    """0.8 × 30 = 24.000000000000004 in floating point: 24 equal columns must count."""
    first = torch.zeros(30, dtype=torch.int64)
    second = first.clone()
    second[:6] = 1  # 24 of 30 columns equal: identity exactly 0.8
    assert identity_neighbours(torch.stack([first, second]), 2, 0.8).tolist() == [2, 2]
    second[6] = 1  # 23 of 30
    assert identity_neighbours(torch.stack([first, second]), 2, 0.8).tolist() == [1, 1]


def test_weights_refuse_bad_input():
    with pytest.raises(DataError, match="symbol indices in 0 … 2"):
        sequence_weights(torch.tensor([[0, 3]]), 3)
    with pytest.raises(DataError, match="integer tensor"):
        sequence_weights(torch.zeros(2, 2), 3)
    with pytest.raises(DataError, match=r"identity must be a fraction in \(0, 1\]"):
        sequence_weights(torch.zeros(2, 2, dtype=torch.int64), 3, identity=80)


@pytest.mark.parametrize("identity", [0.7, 0.9])
def test_homology_split_keeps_close_homologues_on_one_side(identity):
    sequences = _random_alignment(80, 20, 4, seed=3)
    split = homology_split(sequences, 4, 0.2, identity=identity, generator=5, block=9)
    train, test = split.train.numpy(), split.test.numpy()
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(80))
    assert test.size > 0 and train.size > 0
    assert (_identities(sequences)[np.ix_(test, train)] < identity - 1e-12).all()
    again = homology_split(sequences, 4, 0.2, identity=identity, generator=5)
    assert torch.equal(again.test, split.test)


def test_homology_split_refuses_when_one_group_holds_everything():
    sequences = torch.zeros(10, 6, dtype=torch.int64)
    with pytest.raises(DataError, match=r"they form 1 group\(s\), the largest of 10"):
        homology_split(sequences, 2, 0.2)


@pytest.mark.parametrize(
    ("name", "shape", "first"),
    [
        ("WW_domain", (17233, 31), "LPGEWKPCQDIT-GDIYYFNFANGQSMWDHP"),
        ("Kunitz_domain", (11819, 53), "FCYLEEDVGICRGLISRYFYNNQSKQCEEFKYGGCLGNENNFESLEECKRTC-"),
        ("Lattice_Proteins", (46265, 27), "EKAMPAMDPDMAHEHKKKIRAWMFEGE"),
    ],
)
def test_the_shared_alignments_read_with_their_documented_shapes(shared_data, name, shape, first):
    alignment = read_fasta(shared_data / "proteins" / f"{name}_MSA.fasta")
    assert tuple(alignment.sequences.shape) == shape
    assert alignment.names[0] == "S1" and alignment.as_strings()[:1] == [first]

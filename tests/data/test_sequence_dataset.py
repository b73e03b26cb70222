"""Aligned FASTA through ``bl.data.load``: a SequenceDataset with weights and held-out splits.

Properties checked: a FASTA path (by its name, or ``format="fasta"``) loads as a
:class:`SequenceDataset` whose splits are one-hot and read back to the file's sequences; by
default 10% of the sequences are held out by homology, so no held-out sequence is within the
identity of a training one, and each split's weights are a brute-force count of neighbours
within that split; validation and test splits can both be asked for; a random split and no
split work, as does turning weights off; the split depends on ``split_seed`` alone; one pass
(``identity_graph``) gives the same weights and split as the separate functions, and a
homology split accepts a ``torch.Generator``; options that belong to binary files, unknown
alphabets and absurd fractions are refused by name. The WW domain alignment loads with the
documented sizes (slow tier).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab.data.sequence_dataset import SequenceDataset, load_sequences
from boltzlab.data.sequence_weights import (
    homology_split,
    identity_graph,
    identity_neighbours,
)
from boltzlab.errors import DataError, ValidationError

SYMBOLS = "ACDEFGHIKLMNPQRSTVWY-"


def _families(n_families: int, per_family: int, length: int, seed: int) -> list[str]:
    """Families of near-copies (one column changed from a random ancestor): close homologues."""
    generator = torch.Generator().manual_seed(seed)
    sequences = []
    for _ in range(n_families):
        ancestor = torch.randint(0, 21, (length,), generator=generator)
        for _ in range(per_family):
            child = ancestor.clone()
            child[int(torch.randint(0, length, (1,), generator=generator))] = int(
                torch.randint(0, 21, (1,), generator=generator)
            )
            sequences.append("".join(SYMBOLS[i] for i in child))
    return sequences


@pytest.fixture
def family_file(tmp_path: Path) -> Path:
    path = tmp_path / "family.fasta"
    text = "".join(f">s{i}\n{s}\n" for i, s in enumerate(_families(30, 3, 9, seed=0)))
    path.write_text(text)
    return path


def _brute_neighbours(sequences: torch.Tensor, identity: float) -> torch.Tensor:
    equal = (sequences[:, None, :] == sequences[None, :, :]).sum(2)
    return (equal >= math.ceil(identity * sequences.shape[1] - 1e-9)).sum(1)


def test_a_fasta_path_loads_as_a_one_hot_sequence_dataset(family_file: Path) -> None:
    data = bl.data.load(family_file)
    assert isinstance(data, SequenceDataset) and isinstance(data, bl.data.Dataset)
    assert data.n_sites == 9 and data.n_states == 21 and data.n_visible == 9 * 21
    assert data.train.dtype == torch.float32 and bool((data.train.view(-1, 9, 21).sum(2) == 1).all())
    lines = family_file.read_text().split()[1::2]
    for split in ("train", "test"):
        alignment = data.alignment(split)
        rows = getattr(data, f"{split}_rows")
        assert alignment.as_strings() == [lines[row] for row in rows.tolist()]
    assert data.valid is None and data.split == "homology" and data.identity == 0.8
    assert sorted(data.train_rows.tolist() + data.test_rows.tolist()) == list(range(90))
    assert "SequenceDataset" in repr(data) and "N_eff" in data.description


def test_the_default_test_split_keeps_close_homologues_apart(family_file: Path) -> None:
    data = bl.data.load(family_file)
    train, test = data.alignment("train").sequences, data.alignment("test").sequences
    assert 6 <= test.shape[0] <= 18  # 10% of 90, whole families of 3 at a time
    identity = (test[:, None, :] == train[None, :, :]).float().mean(2)
    assert float(identity.max()) < 0.8


def test_each_splits_weights_count_neighbours_within_it(family_file: Path) -> None:
    for split in ("homology", "random"):
        data = bl.data.load(family_file, split=split, test_fraction=0.2, identity=0.7)
        for name in ("train", "test"):
            sequences = data.alignment(name).sequences
            expected = 1.0 / _brute_neighbours(sequences, 0.7).double()
            torch.testing.assert_close(data.weights(name), expected)
            assert data.effective_number(name) == pytest.approx(float(expected.sum()))


def test_validation_and_test_splits_are_disjoint_and_complete(family_file: Path) -> None:
    data = bl.data.load(family_file, test_fraction=0.2, validation_fraction=0.2)
    rows = [getattr(data, f"{name}_rows").tolist() for name in ("train", "valid", "test")]
    assert sorted(row for part in rows for row in part) == list(range(90)) and all(rows)
    valid, train = data.alignment("valid").sequences, data.alignment("train").sequences
    assert float((valid[:, None, :] == train[None, :, :]).float().mean(2).max()) < 0.8


def test_no_split_no_weights_and_the_seed(family_file: Path) -> None:
    whole = bl.data.load(family_file, test_fraction=0, weighted=False)
    assert whole.test is None and whole.train.shape[0] == 90 and whole.split == "none"
    assert whole.train_weights is None and whole.effective_number() == 90.0
    first = bl.data.load(family_file, split_seed=1)
    again = bl.data.load(family_file, split_seed=1, generator=99)  # the training seed plays no part
    other = bl.data.load(family_file, split_seed=2)
    assert torch.equal(first.test_rows, again.test_rows)
    assert not torch.equal(first.test_rows, other.test_rows)


def test_format_fasta_reads_any_name_and_the_alphabet_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "sequences.txt"
    path.write_text(">a\nACGU\n>b\nACGA\n>c\nUUCA\n>d\nGGCA\n")
    data = bl.data.load(path, format="fasta", alphabet="rna", test_fraction=0.25)
    assert data.alphabet.name == "rna" and data.n_states == 5
    assert data.train.shape == (3, 20) and data.test.shape == (1, 20)
    everything = data.alignment("train").as_strings() + data.alignment("test").as_strings()
    assert sorted(everything) == ["ACGA", "ACGU", "GGCA", "UUCA"]
    custom = load_sequences(path, alphabet="custom:ACGU", test_fraction=0)
    assert custom.n_states == 4 and custom.alignment().as_strings()[0] == "ACGU"


def test_one_pass_gives_the_weights_and_the_split_of_the_separate_functions(family_file: Path) -> None:
    sequences = bl.data.read_fasta(family_file).sequences
    # At 0.7 (7 of 9 columns) two children of one ancestor, each one column off it, are linked.
    graph = identity_graph(sequences, 21, 0.7, block=7)
    assert torch.equal(graph.neighbours, identity_neighbours(sequences, 21, 0.7))
    assert graph.n_groups == 30  # the 30 families, each linked within itself
    alone = homology_split(sequences, 21, 0.2, identity=0.7, generator=torch.Generator().manual_seed(3))
    shared = homology_split(sequences, 21, 0.2, identity=0.7, generator=3, graph=graph)
    assert torch.equal(alone.test, shared.test)
    with pytest.raises(DataError, match="graph= was computed"):
        homology_split(sequences, 21, 0.2, identity=0.9, graph=graph)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"binarize": "threshold"}, ValidationError, "unknown option"),
        ({"alphabet": "klingon"}, DataError, "unknown alphabet"),
        ({"split": "clustered"}, ValidationError, "split must be one of homology, random"),
        ({"identity": 1.5}, ValidationError, "identity must be a fraction"),
        ({"test_fraction": 0.6, "validation_fraction": 0.5}, ValidationError, "below 1"),
        ({"alphabet": "dna"}, DataError, "not in the dna alphabet"),
    ],
    ids=["binary option", "alphabet", "split", "identity", "fractions", "wrong alphabet"],
)
def test_bad_options_are_refused_by_name(family_file: Path, options, error, message) -> None:
    with pytest.raises(error, match=message):
        bl.data.load(family_file, **options)


@pytest.mark.slow
def test_the_ww_domain_loads_with_its_documented_sizes(shared_data: Path) -> None:
    data = bl.data.load(shared_data / "proteins" / "WW_domain_MSA.fasta")
    assert data.train.shape == (15_401, 31 * 21) and data.test.shape == (1_832, 31 * 21)
    assert data.effective_number("train") + data.effective_number("test") == pytest.approx(2682.41, abs=0.01)

"""boltzlab.Chains: the frozen state of a batch of chains.

Properties checked: construction refuses anything but a non-empty tuple of 2-D layers with
one chain count, one dtype and device, and one β per chain, naming the offending layer;
instances are frozen and slotted; ``with_beta``, ``select``, ``concatenate`` and ``to`` return new chains
and leave the original untouched; shapes and properties follow axis 0 = chains.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import boltzlab as bl

N_CHAINS, N_VISIBLE, N_HIDDEN = 13, 7, 3


def make_chains(dtype: torch.dtype = torch.float32) -> bl.Chains:
    generator = torch.Generator().manual_seed(0)
    visible = (torch.rand(N_CHAINS, N_VISIBLE, generator=generator) < 0.5).to(dtype)
    hidden = (torch.rand(N_CHAINS, N_HIDDEN, generator=generator) < 0.5).to(dtype)
    return bl.Chains(layers=(visible, hidden), beta=torch.linspace(0, 1, N_CHAINS, dtype=dtype))


def test_properties_follow_the_chain_axis():
    chains = make_chains()
    assert chains.n_chains == N_CHAINS
    assert chains.visible is chains.layers[0] and chains.visible.shape == (N_CHAINS, N_VISIBLE)
    assert chains.dtype == torch.float32 and chains.device.type == "cpu"
    continuous = bl.Chains(
        layers=(torch.randn(5, 2, generator=torch.Generator().manual_seed(1)),), beta=torch.ones(5)
    )
    assert continuous.n_chains == 5 and len(continuous.layers) == 1


@pytest.mark.parametrize(
    ("layers", "beta", "error", "message"),
    [
        ([torch.zeros(3, 2)], torch.ones(3), TypeError, "non-empty tuple"),
        ((), torch.ones(3), TypeError, "non-empty tuple"),
        ((torch.zeros(3),), torch.ones(3), ValueError, r"layers\[0\] has shape \(3,\)"),
        (
            (torch.zeros(3, 2), torch.zeros(4, 2)),
            torch.ones(3),
            ValueError,
            r"layers\[1\] has shape \(4, 2\).*\(3\)",
        ),
        ((torch.zeros(3, 2), torch.zeros(3, 1, 1)), torch.ones(3), ValueError, r"layers\[1\]"),
        (
            (torch.zeros(3, 2), torch.zeros(3, 2, dtype=torch.float64)),
            torch.ones(3),
            ValueError,
            r"layers\[1\] is torch.float64 .* share dtype and device \(torch.float32",
        ),
        ((torch.zeros(3, 2),), torch.ones(4), ValueError, r"beta has shape \(4,\), expected \(3,\)"),
        ((torch.zeros(3, 2),), torch.tensor(1.0), ValueError, r"beta has shape \(\), expected \(3,\)"),
    ],
)
def test_construction_refuses_inconsistent_layers_by_name(layers, beta, error, message):
    with pytest.raises(error, match=message):
        bl.Chains(layers=layers, beta=beta)


def test_chains_are_frozen_and_slotted():
    chains = make_chains()
    with pytest.raises(dataclasses.FrozenInstanceError):
        chains.beta = torch.zeros(N_CHAINS)
    with pytest.raises((AttributeError, TypeError)):
        chains.extra = 1
    assert not hasattr(chains, "__dict__")


def test_with_beta_returns_new_chains_with_a_scalar_or_a_vector():
    chains = make_chains()
    beta_before = chains.beta.clone()
    hot = chains.with_beta(0.25)
    assert hot is not chains and hot.layers is chains.layers, "states are shared, not copied"
    assert (
        hot.beta.shape == (N_CHAINS,) and bool((hot.beta == 0.25).all()) and hot.beta.dtype == torch.float32
    )
    hot.beta[0] = 0.5  # its own storage: the scalar is expanded into a new tensor
    assert bool((hot.beta[1:] == 0.25).all())
    ladder = torch.linspace(0.1, 1.0, N_CHAINS, dtype=torch.float64)
    assert torch.equal(chains.with_beta(ladder).beta, ladder.float())
    assert torch.equal(chains.beta, beta_before), "the original keeps its beta"
    with pytest.raises(ValueError, match="beta has shape"):
        chains.with_beta(torch.ones(N_CHAINS + 1))


@pytest.mark.parametrize(
    "index",
    [slice(2, 9), torch.tensor([12, 0, 5]), torch.arange(N_CHAINS) % 3 == 0],
)
def test_select_picks_chains_along_axis_zero(index):
    chains = make_chains()
    picked = chains.select(index)
    for layer, original in zip(picked.layers, chains.layers, strict=True):
        assert torch.equal(layer, original[index])
    assert torch.equal(picked.beta, chains.beta[index])
    assert picked.n_chains == chains.beta[index].shape[0]


def test_concatenate_puts_chains_one_after_another():
    chains = make_chains()
    joined = bl.Chains.concatenate([chains.select(slice(0, 4)), chains.select(slice(4, None))])
    for layer, original in zip(joined.layers, chains.layers, strict=True):
        assert torch.equal(layer, original)
    assert torch.equal(joined.beta, chains.beta)
    with pytest.raises(ValueError, match="at least one"):
        bl.Chains.concatenate([])


def test_to_moves_dtype_and_keeps_values():
    chains = make_chains()
    as64 = chains.to(dtype=torch.float64)
    assert as64.dtype == torch.float64 and as64.beta.dtype == torch.float64
    for layer, original in zip(as64.layers, chains.layers, strict=True):
        assert torch.equal(layer, original.double())
    assert chains.dtype == torch.float32, "the original is untouched"
    on_cpu = chains.to("cpu")
    assert on_cpu.device.type == "cpu" and on_cpu.dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(on_cpu.layers, chains.layers, strict=True))


def test_replace_revalidates():
    chains = make_chains()
    with pytest.raises(ValueError, match="beta has shape"):
        dataclasses.replace(chains, beta=torch.ones(2))
    assert dataclasses.replace(chains, beta=torch.zeros(N_CHAINS)).beta.sum() == 0


def test_checkpoint_tensors_round_trip_with_and_without_beta():
    chains = make_chains()
    tensors = bl.chains.chains_to_tensors(chains, "slow")
    assert sorted(tensors) == ["slow.beta", "slow.layer0", "slow.layer1"]
    assert tensors["slow.layer0"].data_ptr() != chains.visible.data_ptr()  # copies, not views
    back = bl.chains.chains_from_tensors(tensors, "slow", dtype=torch.float64, device="cpu")
    assert back.dtype == torch.float64 and torch.equal(back.beta, chains.beta.double())
    assert all(torch.equal(a, b.double()) for a, b in zip(back.layers, chains.layers, strict=True))
    without = bl.chains.chains_to_tensors(chains, with_beta=False)
    assert sorted(without) == ["chains.layer0", "chains.layer1"]
    at_one = bl.chains.chains_from_tensors(
        without, dtype=torch.float32, device="cpu", layer_sizes=(N_VISIBLE, N_HIDDEN), beta=1.0
    )
    assert torch.equal(at_one.beta, torch.ones(N_CHAINS)) and torch.equal(at_one.visible, chains.visible)


@pytest.mark.parametrize(
    ("change", "options", "message"),
    [
        (lambda t: t.pop("chains.beta"), {}, "no chains under 'chains'"),
        (lambda t: t.clear(), {"beta": 1.0}, "no chains under 'chains'"),
        (lambda t: None, {"layer_sizes": (N_VISIBLE,)}, "2 layers under 'chains'; the model has 1"),
        (lambda t: None, {"layer_sizes": (N_VISIBLE, 4)}, "the model's layer has 4 units"),
        (lambda t: t.update({"chains.layer1": torch.zeros(2, N_HIDDEN)}), {}, "inconsistent chains"),
    ],
)
def test_checkpoint_tensors_that_do_not_fit_are_refused_by_name(change, options, message):
    tensors = bl.chains.chains_to_tensors(make_chains())
    change(tensors)
    with pytest.raises(bl.errors.ValidationError, match=message):
        bl.chains.chains_from_tensors(tensors, dtype=torch.float32, device="cpu", **options)

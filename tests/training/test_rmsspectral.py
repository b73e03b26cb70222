"""RMSspectral: the sharp operator's algebra, RMSprop on vectors, descent on an exact RBM loss."""

import itertools

import pytest
import torch

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import all_binary_states
from boltzlab.training.rmsspectral import RMSspectral, sharp


def test_sharp_keeps_singular_vectors_and_sets_singular_values_to_the_trace_norm():
    g = torch.Generator().manual_seed(0)
    matrix = torch.randn(7, 3, generator=g, dtype=torch.float64)
    result = sharp(matrix)
    singular = torch.linalg.svdvals(matrix)
    assert torch.allclose(torch.linalg.svdvals(result), singular.sum().expand(3))
    # duality: <A, A#> = ||A||_tr^2 and ||A#||_2 = ||A||_tr
    assert torch.allclose((matrix * result).sum(), singular.sum() ** 2)
    rank_one = torch.outer(
        torch.randn(7, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    )
    assert torch.allclose(sharp(rank_one), rank_one)


def test_vectors_take_exactly_the_rmsprop_step():
    bias = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))
    reference = torch.nn.Parameter(bias.detach().clone())
    ours = RMSspectral([bias], lr=0.01, alpha=0.9, eps=1e-8)
    theirs = torch.optim.RMSprop([reference], lr=0.01, alpha=0.9, eps=1e-8)
    for step in range(5):
        gradient = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) * (step + 1)
        bias.grad, reference.grad = gradient.clone(), gradient.clone()
        ours.step()
        theirs.step()
    assert torch.allclose(bias, reference, atol=1e-12)


def test_small_steps_decrease_the_exact_negative_log_likelihood():
    # A 6x3 RBM, exact loss by enumeration: RMSspectral steps with the exact gradient descend.
    g = torch.Generator().manual_seed(1)
    model = bl.RBM(6, 3, generator=g, weight_std=0.5, dtype=torch.float64)
    data = all_binary_states(6)[torch.randint(0, 64, (20,), generator=g)]

    def loss() -> torch.Tensor:
        states = all_binary_states(3, dtype=torch.float64)
        log_f_data = data @ model.visible_bias + torch.nn.functional.softplus(
            model.hidden_bias + data @ model.weights
        ).sum(1)
        log_f_hidden = states @ model.hidden_bias + torch.nn.functional.softplus(
            model.visible_bias + states @ model.weights.T
        ).sum(1)
        return -(log_f_data.mean() - torch.logsumexp(log_f_hidden, 0))

    optimizer = RMSspectral(model.parameters(), lr=1e-3, alpha=0.99)
    values = []
    for _ in range(30):
        optimizer.zero_grad()
        value = loss()
        value.backward()
        optimizer.step()
        values.append(float(value.detach()))
    assert values[-1] < values[0]
    assert all(later <= earlier + 1e-9 for earlier, later in itertools.pairwise(values))


def test_bad_hyperparameters_are_refused():
    parameter = torch.nn.Parameter(torch.zeros(2, 2))
    for kwargs in ({"lr": 0.0}, {"alpha": 1.0}, {"eps": 0.0}):
        with pytest.raises(ValidationError):
            RMSspectral([parameter], **kwargs)

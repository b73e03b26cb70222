"""CD-k and PCD-k: they learn, their gradient is the log-likelihood gradient, and the door
refuses bad input.

Properties checked:
* CD-1 and PCD-1 with every operator raise the exact log-likelihood of a 16×8 RBM on 4×4
  bars-and-stripes, by a margin measured in run-to-run standard errors (3 seeds);
* the gradient PCD applies equals, within standard errors of its chains, the exact gradient
  of the mean log-likelihood (autograd through enumeration) — sign and scale included;
* the applied update is exactly −lr × (model term − data term) of the chains it reports;
* inputs are not mutated; bad data and arguments raise ValidationError naming the argument.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import boltzlab as bl
from boltzlab.errors import ValidationError
from boltzlab.models.rbm import all_binary_states
from boltzlab.training import (
    CDState,
    ContrastiveDivergence,
    NegativePhase,
    PersistentContrastiveDivergence,
    RBMObjective,
    train,
)

OPERATORS = ("gibbs", "flip", "mixture")
FAST_PAIRS = {("cd", "gibbs"), ("pcd", "flip"), ("cd", "mixture")}


def bars_and_stripes(size: int = 4) -> torch.Tensor:
    """The 2^(size+1) − 2 distinct size×size bars-and-stripes images, flattened."""
    rows = []
    for code in range(2**size):
        bits = torch.tensor([(code >> i) & 1 for i in range(size)], dtype=torch.float32)
        rows.append(bits[:, None].expand(size, size).reshape(-1))  # horizontal stripes
        rows.append(bits[None, :].expand(size, size).reshape(-1))  # vertical bars
    return torch.unique(torch.stack(rows), dim=0)


# Both algorithms and every operator in the fast tier (three pairs); the other three pairs
# (about 1.7 s each) run in the slow tier.
@pytest.mark.parametrize(
    ("algorithm", "operator"),
    [
        pytest.param(
            algorithm,
            operator,
            marks=() if (algorithm, operator) in FAST_PAIRS else pytest.mark.slow,
            id=f"{operator}-{algorithm}",
        )
        for operator in OPERATORS
        for algorithm in ["cd", "pcd"]
    ],
)
def test_training_raises_exact_log_likelihood(algorithm: str, operator: str) -> None:
    data = bars_and_stripes()
    assert data.shape == (30, 16)
    gains = []
    for seed in range(3):
        model = bl.RBM(n_visible=16, n_hidden=8, generator=seed)
        result = train(
            model,
            data,
            algorithm=algorithm,
            operator=operator,
            n_chains=30,
            batch_size=10,
            n_updates=400,
            learning_rate=0.2,
            momentum=0.5,
            log_every=400,
            track_exact_every=400,
            generator=seed,
        )
        first, last = result.history[0], result.history[-1]
        assert (first.update, last.update) == (0, 400)
        # Before training the weights are ~N(0, 0.01²): p(v) is nearly uniform over 2^16 states.
        assert first.train_log_likelihood == pytest.approx(-16 * math.log(2), abs=0.05)
        gains.append(last.train_log_likelihood - first.train_log_likelihood)
    gains_t = torch.tensor(gains, dtype=torch.float64)
    standard_error = float(gains_t.std()) / math.sqrt(len(gains))
    assert all(gain > 0 for gain in gains), gains
    # The mean gain clears zero by 4 run-to-run standard errors (and is a visible 0.25 nats).
    assert float(gains_t.mean()) > max(4 * standard_error, 0.25), gains


def _exact_gradient(model: bl.RBM, data: torch.Tensor) -> list[torch.Tensor]:
    """∂/∂θ of −mean log p(data) by autograd through the enumeration of every v."""
    weights = model.weights.detach().clone().requires_grad_(True)
    visible_bias = model.visible_bias.detach().clone().requires_grad_(True)
    hidden_bias = model.hidden_bias.detach().clone().requires_grad_(True)

    def log_f(v: torch.Tensor) -> torch.Tensor:
        return v @ visible_bias + F.softplus(hidden_bias + v @ weights).sum(1)

    states = all_binary_states(model.n_visible, dtype=torch.float64)
    loss = -(log_f(data).mean() - torch.logsumexp(log_f(states), 0))
    return list(torch.autograd.grad(loss, (weights, visible_bias, hidden_bias)))


@pytest.mark.parametrize("operator", ["gibbs", "flip"])
def test_pcd_gradient_matches_exact_gradient(operator: str) -> None:
    """Sign and scale: the applied update equals −lr × the exact gradient within chain noise."""
    g = torch.Generator().manual_seed(5)
    n_visible, n_hidden, n_examples, n_chains = 5, 3, 11, 20_000
    model = bl.RBM(
        weights=(torch.rand(n_visible, n_hidden, generator=g, dtype=torch.float64) * 2 - 1) * 2,
        visible_bias=torch.randn(n_visible, generator=g, dtype=torch.float64),
        hidden_bias=torch.randn(n_hidden, generator=g, dtype=torch.float64),
        dtype=torch.float64,
    )
    data = (torch.rand(n_examples, n_visible, generator=g) < 0.4).double()
    before = [p.detach().clone() for p in model.parameters()]
    exact = _exact_gradient(model, data)
    learning_rate = 1e-3
    result = train(
        model,
        data,
        algorithm="pcd",
        algorithm_params={"init": "base"},
        operator=operator,
        k=60,  # one update whose chains have run 60 sweeps: stationary for this model
        n_chains=n_chains,
        batch_size=n_examples,  # the whole data set: the data term is exact
        n_updates=1,
        learning_rate=learning_rate,
        generator=7,
    )
    applied = [
        (old - new.detach()) / learning_rate for old, new in zip(before, model.parameters(), strict=True)
    ]

    # The update is exactly model term − data term of the reported chains (at the old θ).
    old_weights, _, old_hidden_bias = before
    v_model = result.final_chains.visible
    h_model = torch.sigmoid(old_hidden_bias + v_model @ old_weights)
    h_data = torch.sigmoid(old_hidden_bias + data @ old_weights)
    per_chain = [v_model[:, :, None] * h_model[:, None, :], v_model, h_model]
    data_term = [data.t() @ h_data / n_examples, data.mean(0), h_data.mean(0)]
    for applied_part, chains_part, data_part in zip(applied, per_chain, data_term, strict=True):
        torch.testing.assert_close(applied_part, chains_part.mean(0) - data_part, rtol=0, atol=1e-9)

    # ... and its expectation is the exact gradient: z-scores within the chains' standard errors.
    for name, applied_part, chains_part, exact_part in zip(
        ("weights", "visible_bias", "hidden_bias"), applied, per_chain, exact, strict=True
    ):
        standard_error = chains_part.std(0) / math.sqrt(n_chains)
        z = (applied_part - exact_part) / standard_error
        assert float(z.abs().max()) < 4.5, (name, z)
        assert float(exact_part.abs().max()) > 10 * float(standard_error.max())  # a real signal


def test_cd_starts_at_the_batch_and_keeps_shapes() -> None:
    g = torch.Generator().manual_seed(0)
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    batch = (torch.rand(13, 7, generator=g) < 0.5).float()
    phase = ContrastiveDivergence(operator=bl.operators.get("gibbs"), k=2)
    assert isinstance(phase, NegativePhase)
    positive = RBMObjective().positive(model, batch)
    kept = batch.clone()
    state, samples = phase.step(
        model, phase.init(model, batch, generator=g), batch=batch, positive=positive, generator=g
    )
    assert isinstance(state, CDState) and state.chains is samples
    assert [tuple(layer.shape) for layer in samples.layers] == [(13, 7), (13, 3)]
    assert torch.equal(samples.beta, torch.ones(13))
    assert torch.equal(batch, kept)
    # A CD chain whose operator never moves stays at its data point: v^k = v.
    frozen = bl.RBM(weights=torch.zeros(7, 3), visible_bias=torch.full((7,), -60.0))
    zeros = torch.zeros(13, 7)
    _, samples = phase.step(
        frozen, CDState(), batch=zeros, positive=RBMObjective().positive(frozen, zeros), generator=g
    )
    assert torch.equal(samples.visible, zeros)


def test_pcd_chains_persist_and_round_trip() -> None:
    g = torch.Generator().manual_seed(1)
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    data = (torch.rand(11, 7, generator=g) < 0.5).float()
    phase = PersistentContrastiveDivergence(operator=bl.operators.get("flip"), k=1, n_chains=13)
    state = phase.init(model, data, generator=g)
    assert state.chains.n_chains == 13
    assert torch.equal(state.chains.beta, torch.ones(13))
    # Initialised from data: every visible state is a training example.
    matches = (state.chains.visible[:, None, :] == data[None, :, :]).all(2).any(1)
    assert bool(matches.all())
    new_state, samples = phase.step(model, state, batch=data[:5], positive=(), generator=g)
    assert samples is new_state.chains and samples is not state.chains
    rebuilt = phase.state_from_tensors(model, phase.state_tensors(new_state))
    for a, b in zip(rebuilt.chains.layers, new_state.chains.layers, strict=True):
        assert torch.equal(a, b)


def test_same_seed_same_run_and_inputs_untouched() -> None:
    data = bars_and_stripes()
    kept = data.clone()
    runs = []
    for _ in range(2):
        model = bl.RBM(n_visible=16, n_hidden=5, generator=3)
        result = train(
            model,
            data,
            algorithm="pcd",
            operator="mixture",
            operator_params={"alpha": 0.3},
            n_chains=13,
            batch_size=7,
            n_epochs=3,
            momentum=0.5,
            generator=11,
        )
        runs.append(result)
    assert torch.equal(data, kept)
    assert runs[0].n_updates == 3 * (30 // 7) == runs[0].history[-1].update
    assert runs[0].history[-1].epoch == 3
    for a, b in zip(runs[0].model.parameters(), runs[1].model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert torch.equal(runs[0].final_chains.visible, runs[1].final_chains.visible)
    assert runs[0].model.metadata["training"]["algorithm"] == "pcd"


def test_sap_is_another_name_of_pcd() -> None:
    # The CAST paper's SAP is PCD: the same seed gives the same parameters bit for bit.
    data = bars_and_stripes()
    models = []
    for algorithm in ("sap", "pcd"):
        model = bl.RBM(n_visible=16, n_hidden=5, generator=3)
        train(model, data, algorithm=algorithm, n_chains=13, batch_size=7, n_updates=20, generator=11)
        models.append(model)
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)


def test_data_validation() -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    good = torch.zeros(20, 7)
    with pytest.raises(ValidationError, match="data has 6 units per example, the model expects 7"):
        train(model, torch.zeros(20, 6), n_updates=1, batch_size=5)
    with pytest.raises(ValidationError, match=r"data must have shape \(n_examples, n_units\)"):
        train(model, torch.zeros(7), n_updates=1, batch_size=5)
    with pytest.raises(ValidationError, match="data must be binary"):
        train(model, torch.full((20, 7), 0.5), n_updates=1, batch_size=5)
    with pytest.raises(ValidationError, match="validation_data has 8 units"):
        train(model, good, validation_data=torch.zeros(3, 8), n_updates=1, batch_size=5)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"algorithm": "cdd"}, "unknown algorithm 'cdd'; choose one of .*cd, .*pcd"),
        ({"operator": "metropolis"}, "unknown operator 'metropolis'"),
        ({"operator": "mixture", "operator_params": {"beta": 2}}, "bad parameters for operator"),
        ({"algorithm": "pcd", "algorithm_params": {"init": "zeros"}}, "init must be one of data, base"),
        ({"n_epochs": 2}, "give exactly one of n_updates and n_epochs"),
        ({"n_updates": None}, "give exactly one of n_updates and n_epochs"),
        ({"n_updates": 0}, "n_updates must be a positive integer, got 0"),
        ({"k": 0}, "k must be a positive integer"),
        ({"batch_size": 21}, "batch_size=21 exceeds the 20 training examples"),
        ({"learning_rate": 0.0}, r"learning_rate must be in \(0, inf\), got 0.0"),
        ({"learning_rate": float("nan")}, "learning_rate must be a finite number"),
        ({"momentum": 1.0}, r"momentum must be in \[0, 1\), got 1.0"),
        ({"weight_decay": -0.1}, "weight_decay must be in"),
        ({"lr_schedule": "cosine"}, "lr_schedule must be one of 'constant', 'linear', 'inverse'"),
        ({"checkpoint_every": 5}, "need checkpoint_dir"),
        ({"resume": True}, "need checkpoint_dir"),
        ({"callbacks": [print]}, "callbacks must be boltzlab.training.Callback instances"),
        ({"track_exact_every": 0}, "track_exact_every must be a positive integer"),
    ],
)
def test_argument_validation(arguments: dict, message: str) -> None:
    model = bl.RBM(n_visible=7, n_hidden=3, generator=0)
    settings = {"n_updates": 2, "batch_size": 5, **arguments}
    with pytest.raises(ValidationError, match=message):
        train(model, torch.zeros(20, 7), **settings)


def test_exact_tracking_refuses_large_models() -> None:
    model = bl.RBM(n_visible=30, n_hidden=26, generator=0)
    with pytest.raises(ValidationError, match="exact log Z enumerates 2\\^26 states"):
        train(model, torch.zeros(10, 30), n_updates=1, batch_size=5, track_exact_every=1)

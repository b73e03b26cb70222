"""One process of a real ``torch.distributed`` group, run by ``tests/distributed/test_sharded.py``.

``python worker.py SCENARIO OUT`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``
and ``MASTER_PORT`` set, as torchrun sets them; rank 0 saves what the scenario returns to OUT
(``torch.save``). A scenario that fails prints one line on stderr and exits with status 1.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch

import boltzlab as bl
from boltzlab import distributed
from boltzlab.errors import BoltzlabError


def tiny_model() -> tuple[bl.RBM, torch.Tensor]:
    """A 12×6 RBM with weights large enough that AIS's weights vary (exact log Z by enumeration)."""
    model = bl.RBM(n_visible=12, n_hidden=6, generator=3)
    with torch.no_grad():
        model.weights.mul_(4.0)
    data = (torch.rand(40, 12, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    return model.set_base_rate(data), data


def ais() -> dict:
    model, _ = tiny_model()
    # A chain budget that must grow (a 0.001-nat target): 64 chains, then 128 more, every
    # process deciding the second round from the same gathered weights.
    result = bl.estimate_log_z(
        model,
        method="ais",
        n_chains=64,
        max_chains=192,
        target_stderr=1e-3,
        n_temperatures=300,
        schedule="linear",
        blocks=8,
        generator=5,
    )
    return {
        "rounds": result.info.budget.rounds,
        "log_weights": result.info.log_weights,
        "log_z": result.log_z,
        "stderr": result.stderr,
        "exact": bl.exact_log_z(model),
        "final_visible": result.info.final_chains.layers[0].cpu(),
        "lower_bound": (result.lower_bound.log_z, result.lower_bound.n_states, result.lower_bound.n_draws),
        "reliable": result.reliable,
    }


def raise_() -> dict:
    model, data = tiny_model()
    result = bl.estimate_log_z(
        model,
        method="raise",
        data=data[:12],
        n_chains=4,
        n_temperatures=200,
        schedule="linear",
        blocks=4,
        generator=5,
    )
    return {"log_weights": result.info.log_weights, "log_z": result.log_z}


def rts() -> dict:
    model, _ = tiny_model()
    result = bl.estimate_log_z(
        model,
        method="rts",
        n_chains=16,
        n_temperatures=12,
        ladder="linear",
        n_sweeps=300,
        # An unreachable precision target makes the budget add chains once (16, then 32, each
        # for 300 sweeps), a decision every process must take alike.
        max_sweeps=2100,
        max_chains=32,
        target_stderr=0.001,
        blocks=4,
        generator=5,
    )
    samples = result.info.samples
    return {
        "rounds": [(round_.n_chains, round_.long_run_sweeps) for round_ in result.info.budget.rounds],
        "log_z": result.log_z,
        "stderr": result.stderr,
        "reliable": result.reliable,
        "exact": bl.exact_log_z(model),
        "log_probability_sums": samples.log_probability_sums,
        "level_counts": samples.level_counts,
        "stage_log_z_hat": samples.stage_log_z_hat,
    }


def plain_sampling() -> dict:
    model, _ = tiny_model()
    result = bl.sample(
        model, operator="flip", n_chains=24, n_sweeps=30, keep_every=10, record_energy=True, generator=5
    )
    return {"samples": result.samples, "energies": result.energies, "flip_rate": result.info.flip_rate}


def tempered_sampling() -> dict:
    """PT, ST, AST and CAST (adapted, then frozen) on the two-mode 10×4 RBM (69% / 31%), systems sharded."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness import bimodal_rbm

    model, _ = bimodal_rbm(10, 4, seed=0, tilt=0.08)
    results = {}
    for name in ("pt", "st", "ast", "cast"):
        result = bl.sample(
            model, sampler=name, n_chains=32, n_sweeps=300, keep_every=1, generator=3, blocks=8
        )
        summary = result.info.summary
        trips = summary.fast.round_trips if name == "cast" else summary.round_trips
        results[name] = {
            "samples": result.samples,
            "chains": result.chains.layers[1],
            "round_trips": trips,
            "reliable": result.reliable,
            "warnings": result.warnings,
            "log_weights": None if result.info.adaptation is None else result.info.adaptation.log_weights,
            "swap_acceptance": getattr(summary, "swap_acceptance", None),
        }
    return results


def dbm_likelihood() -> dict:
    from boltzlab.estimators.dbm_likelihood import estimate_log_likelihood

    dbm = bl.DBM(layer_sizes=[6, 4, 3], generator=0, weight_std=1.0)
    v = (torch.arange(30).view(5, 6) % 4 == 0).float()
    result = estimate_log_likelihood(
        dbm, v, log_z=bl.exact_log_z(dbm), n_chains=50, n_temperatures=60, blocks=5, generator=5
    )
    return {"log_weights": result.log_weights, "log_probability": result.log_probability}


def dies() -> dict:
    """Rank 1 dies before the weights are gathered; the others must stop with an error, not hang."""
    if distributed.topology().rank == 1:
        os._exit(3)
    return ais()


def freezes() -> dict:
    """Rank 1 stops answering (a hung process) before the weights are gathered; the others must
    stop with an error once the group's timeout passes, not wait for it forever."""
    if distributed.topology().rank == 1:
        time.sleep(float(os.environ.get("FREEZE_S", "120")))
        os._exit(4)
    return ais()


def different_seeds() -> dict:
    model, _ = tiny_model()
    seed = 5 + distributed.topology().rank
    bl.estimate_log_z(model, method="ais", n_chains=16, n_temperatures=20, blocks=4, generator=seed)
    return {}


def training(algorithm: str, *, n_updates: int = 20, checkpoints: str | None = None, **extra) -> dict:
    """Data-parallel CD-1 or PCD-1; the whole minibatch and chains split over the ranks.

    With ``checkpoints``, checkpoints every 5 updates go there and an existing run resumes;
    ``extra`` goes to ``bl.train`` (centring, penalties, sample weights).
    """
    model, data = tiny_model()
    data = torch.cat([data, 1 - data])  # 80 examples
    result = bl.train(
        model,
        data,
        **extra,
        algorithm=algorithm,
        batch_size=20,
        n_chains=16,
        n_updates=n_updates,
        learning_rate=0.1,
        checkpoint_dir=checkpoints,
        checkpoint_every=None if checkpoints is None else 5,
        resume=checkpoints is not None and os.path.isdir(checkpoints) and bool(os.listdir(checkpoints)),
        chain_blocks=4,
        generator=11,
        snapshots=None,
    )
    return {
        "parameters": {name: value.detach().clone() for name, value in model.state_dict().items()},
        "final_visible": result.final_chains.layers[0],
    }


def train_different_seeds() -> dict:
    model, data = tiny_model()
    bl.train(model, data, algorithm="pcd", batch_size=20, n_chains=16, n_updates=5,
             generator=distributed.topology().rank, snapshots=None)  # fmt: skip
    return {}


SCENARIOS = {
    "tempered_sampling": tempered_sampling,
    "train_different_seeds": train_different_seeds,
    "dbm_likelihood": dbm_likelihood,
    "plain_sampling": plain_sampling,
    "rts": rts,
    "train_pcd": lambda: training("pcd"),
    "train_cd": lambda: training("cd"),
    # Centred, penalised and weighted: the centring means are averaged over the ranks like the gradient.
    "train_pcd_centred": lambda: training(
        "pcd", centering=True, l1=1e-3, l1_squared=1e-2, sample_weights=torch.arange(80.0) % 5
    ),
    "train_pcd_first_10": lambda: training("pcd", n_updates=10, checkpoints=os.environ["CHECKPOINTS"]),
    "train_pcd_resume_to_20": lambda: training("pcd", checkpoints=os.environ["CHECKPOINTS"]),
    "ais": ais,
    "raise": raise_,
    "dies": dies,
    "freezes": freezes,
    "different_seeds": different_seeds,
}


def main() -> None:
    scenario, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    try:
        here = distributed.init_from_environment()
        result = SCENARIOS[scenario]()
    except BoltzlabError as error:
        print(f"error: {error}", file=sys.stderr)
        distributed.exit_now(1)
    if here.is_main:
        torch.save({**result, "world_size": here.world_size}, out)
    distributed.finish()


if __name__ == "__main__":
    main()

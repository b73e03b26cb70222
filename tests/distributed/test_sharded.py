"""Chain-sharded estimators on real 2-process gloo groups (docs/architecture.md, "Scaling out").

Each test starts its processes as torchrun would (``RANK``, ``WORLD_SIZE``, ``MASTER_*``) and
runs ``worker.py``; the CLI test starts ``torchrun`` itself. A few seconds each, on the CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import boltzlab as bl
from boltzlab import distributed
from boltzlab.rng import BlockGenerator

# Process groups under torchrun (several processes per test): the slow tier (make test-all).
pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("worker.py")
TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _environment(rank: int, world: int, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "OMP_NUM_THREADS": "1",
        "BOLTZLAB_DIST_TIMEOUT": "60",
    }


def run_group(
    scenario: str, world: int, tmp_path: Path, **env: str
) -> tuple[list[subprocess.CompletedProcess], dict]:
    """Run ``scenario`` on ``world`` processes; their outcomes and rank 0's saved result.

    Every process is killed if any of them outlives ``TIMEOUT_S`` (no leaked workers holding a
    port); a run whose rendezvous port was taken in the meantime is retried on another one.
    """
    out = tmp_path / f"{scenario}-{world}.pt"
    for _attempt in range(3):
        port = _free_port()
        processes = [
            subprocess.Popen(
                [sys.executable, str(WORKER), scenario, str(out)],
                env={**_environment(rank, world, port), **env},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for rank in range(world)
        ]
        outcomes = []
        try:
            for process in processes:
                stdout, stderr = process.communicate(timeout=TIMEOUT_S)
                outcomes.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        if not any("address already in use" in o.stderr.lower() for o in outcomes):
            break
    return outcomes, (torch.load(out) if out.exists() else {})


def test_block_generator_rows_do_not_depend_on_grouping():
    """Blocks 0–7 in one batch, or 0–3 and 4–7 in two, draw the same chains."""
    model = bl.RBM(n_visible=9, n_hidden=5, generator=0)

    def run(groups: list[list[int]]) -> torch.Tensor:
        parts = []
        for blocks in groups:
            generator = BlockGenerator(7, blocks, [3] * len(blocks))
            chains = model.init_chains(3 * len(blocks), generator=generator).with_beta(1.0)
            for _ in range(4):
                chains, _ = bl.operators.get("flip").step(model, chains, generator=generator)
            parts.append(torch.cat(chains.layers, 1))
        return torch.cat(parts)

    together = run([list(range(8))])
    assert torch.equal(together, run([[0, 1, 2, 3], [4, 5, 6, 7]]))
    assert torch.equal(together, run([[b] for b in range(8)]))
    assert not torch.equal(together[:3], together[3:6])  # blocks have different streams


@pytest.mark.parametrize("kind", ["gaussian-rbm", "toy-hmc", "dbm"])
def test_block_generator_grouping_invariance_on_every_model_kind(kind):
    """Real-valued units (Gaussian draws), HMC's momenta and Metropolis tests, and a DBM's layers
    also draw through boltzlab.rng, so blocks give the same chains however they are grouped."""
    from boltzlab.models import GaussianMixtureFamily, GaussianRBM

    if kind == "gaussian-rbm":
        model, operator = GaussianRBM(7, 3, generator=0, weight_std=0.3), bl.operators.get("gibbs")
    elif kind == "toy-hmc":
        model, operator = GaussianMixtureFamily(dimension=3), bl.operators.get("hmc")
    else:
        model, operator = bl.DBM(layer_sizes=[6, 4, 3], generator=0, weight_std=1.0), bl.operators.get("flip")

    def run(groups: list[list[int]]) -> torch.Tensor:
        parts = []
        for blocks in groups:
            generator = BlockGenerator(3, blocks, [2] * len(blocks))
            chains = model.init_chains(2 * len(blocks), generator=generator).with_beta(1.0)
            for _ in range(3):
                chains, _ = operator.step(model, chains, generator=generator)
            parts.append(torch.cat([layer.to(torch.float64) for layer in chains.layers], 1))
        return torch.cat(parts)

    together = run([[0, 1, 2, 3]])
    assert torch.equal(together, run([[0, 1], [2, 3]]))
    assert torch.equal(together, run([[0], [1], [2], [3]]))


def test_blocks_on_a_gaussian_rbm_estimate_right():
    from boltzlab.models import GaussianRBM

    model = GaussianRBM(5, 3, generator=1, weight_std=0.3)
    result = bl.estimate_log_z(
        model, method="ais", n_chains=200, n_temperatures=200, schedule="linear", blocks=4, generator=0
    )
    assert abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr


@pytest.mark.parametrize("sampler", ["pt", "st", "cast"])
def test_stacked_draws_of_tempered_schemes_do_not_depend_on_grouping(sampler):
    """PT's levels and CAST's slow and fast chains are stacked copies of the systems: a block
    generator fills each block's rows of every copy from its own stream, so systems 0–3 run in
    one batch or as 0–1 and 2–3 give the same states (what sharding PT, ST and CAST rests on)."""
    model = bl.RBM(n_visible=9, n_hidden=5, generator=0)
    scheme = bl.sampling.make_scheme(sampler, "flip", ladder=[0.0, 0.5, 1.0])

    def run(groups: list[list[int]]) -> torch.Tensor:
        parts = []
        for blocks in groups:
            generator = BlockGenerator(7, blocks, [2] * len(blocks))
            state = scheme.init(model, 2 * len(blocks), generator=generator)
            for _ in range(6):
                state, _ = scheme.step(model, state, generator=generator)
            parts.append(torch.cat(scheme.samples(state).layers, 1))
        return torch.cat(parts)

    together = run([[0, 1, 2, 3]])
    assert torch.equal(together, run([[0, 1], [2, 3]]))
    assert torch.equal(together, run([[0], [1], [2], [3]]))


def test_block_generator_refuses_a_draw_that_is_not_a_stack_of_the_chains():
    generator = BlockGenerator(0, [0, 1], [2, 3])
    with pytest.raises(ValueError, match="stack of copies"):
        bl.rng.rand((7,), generator=generator, dtype=torch.float64, device="cpu")
    assert bl.rng.rand((10, 2), generator=generator, dtype=torch.float64, device="cpu").shape == (10, 2)


def test_blocks_refused_for_a_scheme_that_runs_whole():
    model = bl.RBM(n_visible=6, n_hidden=3, generator=0)
    with pytest.raises(bl.errors.ValidationError, match="runs whole on every process"):
        bl.sample(model, sampler="tt", n_chains=4, n_sweeps=2, blocks=2, generator=0)


def test_more_blocks_than_pilot_chains_are_capped_for_the_pilot():
    """ST's pilot anneals 64 chains: 100 blocks of 200 chains leave it 64 blocks, not an error."""
    model = bl.RBM(n_visible=6, n_hidden=3, generator=0)
    result = bl.sample(
        model, sampler="st", n_chains=200, n_sweeps=4, blocks=100, adapt_sweeps=50, generator=0
    )
    assert result.chains.n_chains == 200


def test_run_scheme_counts_the_systems_of_a_given_state():
    """Without sharding, a state given to run_scheme sets the number of systems (as before)."""
    model = bl.RBM(n_visible=6, n_hidden=3, generator=0)
    scheme = bl.sampling.make_scheme("pt", "gibbs", n_levels=3)
    state = scheme.init(model, 12, generator=bl.rng.make_generator(0))
    result = bl.sampling.run_scheme(
        model, scheme, n_chains=10, n_sweeps=20, generator=bl.rng.make_generator(1), state=state
    )
    assert result.chains.n_chains == 12


def test_a_diagnostic_without_a_chain_axis_must_agree_between_processes():
    from boltzlab.tempering import sharding

    with pytest.raises(bl.errors.DistributedError, match="no declared chain axis"):
        sharding.merge_leaf("novel", [torch.zeros(2, 3), torch.ones(2, 3)], [0.5, 0.5])


def test_owned_blocks_cover_every_block_once():
    for world in (1, 2, 3, 4, 8):
        owned = [
            list(distributed.owned_blocks(8, distributed.Topology(world, rank))) for rank in range(world)
        ]
        assert [block for blocks in owned for block in blocks] == list(range(8))
        assert all(owned)


def test_blocks_refused_when_fewer_than_items():
    with pytest.raises(bl.errors.ValidationError, match="blocks must be between"):
        distributed.shard(4, seed=0, n_blocks=5)


def test_one_process_blocks_match_the_unsharded_estimate_statistically():
    """blocks= in one process without a group: a valid AIS run (within 4 s.e. of exact log Z)."""
    model = bl.RBM(n_visible=10, n_hidden=4, generator=1)
    result = bl.estimate_log_z(
        model, method="ais", n_chains=200, n_temperatures=200, schedule="linear", blocks=8, generator=0
    )
    assert abs(result.log_z - bl.exact_log_z(model)) < 4 * result.stderr


@pytest.fixture(scope="module")
def ais_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ais")
    return {world: run_group("ais", world, tmp) for world in (1, 2, 4)}


@pytest.mark.slow
def test_sharded_ais_same_weights_on_one_two_and_four_processes(ais_runs):
    for world, (outcomes, _) in ais_runs.items():
        assert all(o.returncode == 0 for o in outcomes), (world, [o.stderr[-2000:] for o in outcomes])
    one, two, four = ais_runs[1][1], ais_runs[2][1], ais_runs[4][1]
    assert one["world_size"] == 1 and two["world_size"] == 2 and four["world_size"] == 4
    assert one["rounds"] == two["rounds"] == four["rounds"] == (64, 128)  # AIS's chain budget grew
    assert torch.equal(one["log_weights"], four["log_weights"])  # 8 blocks: 2 per process
    assert one["lower_bound"] == four["lower_bound"]
    assert torch.equal(one["log_weights"], two["log_weights"])
    assert torch.equal(one["final_visible"], two["final_visible"])
    assert one["log_z"] == two["log_z"] and one["stderr"] == two["stderr"]
    # The verdict's certified lower bound: its witness chains are sharded too.
    assert one["lower_bound"] == two["lower_bound"] and one["reliable"] == two["reliable"]
    assert one["lower_bound"][2] == 1000 * 201  # every chain's start and 200 sweeps were counted


@pytest.mark.slow
def test_sharded_ais_agrees_with_exact_log_z(ais_runs):
    result = ais_runs[2][1]
    assert result["log_weights"].shape == (192,)
    assert abs(result["log_z"] - result["exact"]) < 4 * result["stderr"]


@pytest.mark.slow
def test_sharded_raise_same_weights_on_one_and_two_processes(tmp_path):
    runs = {world: run_group("raise", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    assert runs[1][1]["log_weights"].shape == (12, 4)
    assert torch.equal(runs[1][1]["log_weights"], runs[2][1]["log_weights"])


@pytest.mark.slow
def test_sharded_dbm_per_example_likelihood_same_on_one_and_two_processes(tmp_path):
    runs = {world: run_group("dbm_likelihood", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    assert runs[1][1]["log_weights"].shape == (5, 50)
    assert torch.equal(runs[1][1]["log_weights"], runs[2][1]["log_weights"])


@pytest.mark.fault("process groups")
@pytest.mark.slow
def test_a_dead_rank_stops_the_others_with_an_error(tmp_path):
    outcomes, saved = run_group("dies", 2, tmp_path)  # communicate() would time out on a hang
    assert outcomes[1].returncode == 3
    assert outcomes[0].returncode == 1 and not saved
    assert "rank 0 of 2" in outcomes[0].stderr and "failed" in outcomes[0].stderr


@pytest.mark.fault("process groups")
@pytest.mark.slow
def test_a_frozen_rank_stops_the_others_when_the_group_times_out(tmp_path):
    """Rank 1 hangs (it sleeps for two minutes); with BOLTZLAB_DIST_TIMEOUT=8 rank 0 must exit
    with an error that names the failed exchange well before rank 1 wakes up."""
    port = _free_port()
    out = tmp_path / "freezes.pt"
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), "freezes", str(out)],
            env={**_environment(rank, 2, port), "BOLTZLAB_DIST_TIMEOUT": "8", "FREEZE_S": "120"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        _, stderr = processes[0].communicate(timeout=100)
        assert processes[1].poll() is None  # still frozen: rank 0 did not wait for it
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert processes[0].returncode == 1 and not out.exists(), stderr[-2000:]
    assert "rank 0 of 2" in stderr and "failed" in stderr, stderr[-2000:]


@pytest.mark.fault("process groups")
@pytest.mark.slow
def test_data_parallel_training_refuses_ranks_that_disagree(tmp_path):
    outcomes, _ = run_group("train_different_seeds", 2, tmp_path)
    assert all(o.returncode == 1 for o in outcomes)
    assert "disagree on the model parameters, training data and seed" in outcomes[0].stderr


@pytest.mark.fault("process groups")
@pytest.mark.slow
def test_ranks_with_different_seeds_are_refused(tmp_path):
    outcomes, _ = run_group("different_seeds", 2, tmp_path)
    assert all(o.returncode == 1 for o in outcomes)
    assert "disagree on the seed" in outcomes[0].stderr


def _boltzlab() -> str:
    script = Path(sys.executable).with_name("boltzlab")
    return str(script if script.exists() else shutil.which("boltzlab") or "boltzlab")


def _torchrun(*arguments: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for _attempt in range(3):  # another rendezvous may take the port between probe and use
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        command += ["--master-port", str(_free_port()), "--no-python", _boltzlab(), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
        if "EADDRINUSE" not in done.stderr:
            break
    return done


@pytest.mark.slow
def test_train_under_torchrun_writes_one_run(tmp_path):
    """Data-parallel PCD from the command line: rank 0 writes the run, rank 1 prints nothing."""
    out = tmp_path / "run"
    done = _torchrun(
        "train", "--data", "bars-and-stripes", "--hidden", "6", "--algorithm", "pcd", "--chains", "8",
        "--batch-size", "8", "--updates", "30", "--chain-blocks", "4", "--log-every", "10",
        "--tensorboard", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # Rank 0 alone logs to TensorBoard; its sample images must not wait for the other rank.
    assert len(list((out / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert done.stdout.count("trained to update 30") == 1
    model = bl.io.load_model(out / "model.safetensors")
    assert model.metadata["training"]["n_chains"] == 8
    assert (out / "checkpoints").is_dir() and (out / "config.toml").is_file()


@pytest.mark.slow
def test_commands_that_do_not_split_run_whole_on_rank_zero(tmp_path):
    """``report`` and ``reproduce`` under torchrun: every process leaves the group, rank 0 runs the
    command alone (one output), the others stop at once, and the launch succeeds."""
    run = tmp_path / "run"
    trained = _torchrun(
        "train", "--data", "bars-and-stripes", "--hidden", "4", "--algorithm", "cd", "--batch-size", "10",
        "--updates", "20", "--out", str(run),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    (run / "report.html").unlink()
    done = _torchrun("report", str(run))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("report.html") == 1 and (run / "report.html").is_file()
    study = _torchrun("reproduce", "two-node", "--out", str(tmp_path / "two-node"))
    assert study.returncode == 0, study.stderr[-3000:]
    assert (tmp_path / "two-node" / "two-node.csv").is_file()


@pytest.mark.slow
def test_tempered_training_under_torchrun_is_refused_before_writing(tmp_path):
    out = tmp_path / "pt"
    done = _torchrun("train", "--data", "bars-and-stripes", "--hidden", "4", "--algorithm", "pt",
                     "--updates", "5", "--out", str(out))  # fmt: skip
    assert done.returncode != 0
    assert "supports cd and pcd (sap), not 'pt'" in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_logz_under_torchrun_prints_one_json_object(tmp_path):
    """``torchrun --nproc-per-node 2 --no-python boltzlab logz … --json``: rank 0 alone prints."""
    model = bl.RBM(n_visible=12, n_hidden=6, generator=3)
    data = (torch.rand(40, 12, generator=torch.Generator().manual_seed(1)) < 0.4).float()
    model.set_base_rate(data)
    bl.io.save_model(model, tmp_path / "model.safetensors")
    done = _torchrun(
        "logz", str(tmp_path / "model.safetensors"), "--method", "ais", "--chains", "64",
        "--temperatures", "200", "--seed", "3", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(done.stdout)  # exactly one object: rank 1 printed nothing
    assert payload["world_size"] == 2
    assert abs(payload["log_z"] - bl.exact_log_z(model)) < 4 * payload["stderr"] + 0.05


@pytest.mark.slow
def test_tempered_sampling_under_torchrun_prints_one_json_object(tmp_path):
    """``boltzlab sample --sampler pt`` on 2 processes: the systems are split, rank 0 alone prints
    and writes, and it reports every system (gathered), as one process would."""
    model = bl.RBM(n_visible=12, n_hidden=6, generator=3)
    bl.io.save_model(model, tmp_path / "model.safetensors")
    done = _torchrun(
        "sample", str(tmp_path / "model.safetensors"), "--sampler", "pt", "--chains", "16",
        "--sweeps", "40", "--keep-every", "10", "--seed", "3", "--out", str(tmp_path / "s.png"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads(done.stdout)  # exactly one object: rank 1 printed nothing
    assert payload["world_size"] == 2
    assert payload["shape"] == [4, 16, 12]  # every system's samples, gathered on rank 0
    assert len(payload["diagnostics"]["round_trips"]) == 16
    assert sorted(path.name for path in tmp_path.glob("s*.png")) == ["s-temperatures.png", "s.png"]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["pcd", "cd", "pcd_centred"])
def test_data_parallel_training_same_parameters_on_one_and_two_processes(tmp_path, algorithm):
    runs = {world: run_group(f"train_{algorithm}", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    one, two = runs[1][1], runs[2][1]
    for name, value in one["parameters"].items():
        torch.testing.assert_close(two["parameters"][name], value, rtol=1e-5, atol=1e-6)
    assert torch.equal(one["final_visible"], two["final_visible"])
    assert one["final_visible"].shape[0] == (20 if algorithm == "cd" else 16)


@pytest.mark.slow
def test_checkpoint_from_two_processes_resumes_exactly_on_one(tmp_path):
    """10 updates on 2 processes, then resumed to 20 on 1: the 20-update run on 1 process, exactly."""
    checkpoints = str(tmp_path / "checkpoints")
    first, _ = run_group("train_pcd_first_10", 2, tmp_path, CHECKPOINTS=checkpoints)
    assert all(o.returncode == 0 for o in first), [o.stderr[-2000:] for o in first]
    resumed_outcomes, resumed = run_group("train_pcd_resume_to_20", 1, tmp_path, CHECKPOINTS=checkpoints)
    assert resumed_outcomes[0].returncode == 0, resumed_outcomes[0].stderr[-2000:]
    straight_outcomes, straight = run_group("train_pcd", 1, tmp_path)
    assert straight_outcomes[0].returncode == 0
    for name, value in straight["parameters"].items():
        torch.testing.assert_close(resumed["parameters"][name], value, rtol=1e-5, atol=1e-6)
    assert torch.equal(resumed["final_visible"], straight["final_visible"])


@pytest.mark.slow
def test_sharded_rts_same_samples_on_one_and_two_processes_and_right(tmp_path):
    """RTS's chains split over 2 processes: the initial iterations pool every chain's ĉ sums, so the
    adapted Ẑ, the budget's rounds, the long run and the estimate equal the 1-process run's;
    within 4 s.e. of exact."""
    runs = {world: run_group("rts", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    one, two = runs[1][1], runs[2][1]
    assert one["rounds"] == two["rounds"] == [(16, 300), (32, 300)]
    assert one["log_probability_sums"].shape[1] == 32
    for name in ("log_probability_sums", "level_counts", "stage_log_z_hat"):
        torch.testing.assert_close(two[name], one[name], rtol=1e-12, atol=1e-12)
    assert two["log_z"] == pytest.approx(one["log_z"], abs=1e-9)
    assert abs(two["log_z"] - two["exact"]) < 4 * two["stderr"]


@pytest.mark.slow
def test_sharded_plain_sampling_same_chains_on_one_and_two_processes(tmp_path):
    runs = {world: run_group("plain_sampling", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    one, two = runs[1][1], runs[2][1]
    assert one["samples"].shape == (3, 24, 12)
    assert torch.equal(one["samples"], two["samples"])
    assert torch.equal(one["energies"], two["energies"])
    torch.testing.assert_close(one["flip_rate"], two["flip_rate"], rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_sharded_tempered_samplers_same_on_one_and_two_processes_and_right(tmp_path):
    """PT, ST, AST and CAST with their systems split over 2 processes give the 1-process samples bit
    for bit (ST, AST and CAST adapt one weight vector on both processes' chains), and on the two-mode RBM
    (69% / 31%, behind a barrier) their β = 1 samples hold the exact mode mass within 4 s.e."""
    from harness import bimodal_rbm, exact_mode_mass, mode_mass

    runs = {world: run_group("tempered_sampling", world, tmp_path) for world in (1, 2)}
    for outcomes, _ in runs.values():
        assert all(o.returncode == 0 for o in outcomes), [o.stderr[-2000:] for o in outcomes]
    model, pattern = bimodal_rbm(10, 4, seed=0, tilt=0.08)
    exact = exact_mode_mass(model, pattern)
    for name in ("pt", "st", "ast", "cast"):
        one, two = runs[1][1][name], runs[2][1][name]
        assert one["samples"].shape == (300, 32, 10)
        assert torch.equal(one["samples"], two["samples"]), name
        assert torch.equal(one["chains"], two["chains"]), name
        assert torch.equal(one["round_trips"], two["round_trips"]), name
        assert one["warnings"] == two["warnings"]
        if one["log_weights"] is not None:
            assert torch.equal(one["log_weights"], two["log_weights"])
        if one["swap_acceptance"] is not None:
            torch.testing.assert_close(one["swap_acceptance"], two["swap_acceptance"], equal_nan=True)
        share, stderr = mode_mass(two["samples"], pattern)
        assert two["reliable"], (name, two["warnings"])
        assert abs(share - exact) < 4 * stderr, (name, share, stderr, exact)

"""Estimator options at a matched cost: Gibbs sweeps per chain, the x-axis of the papers' figures.

Carlson, Stinson, Pakman & Paninski (2016, Fig. 3; docs/algorithms.md §4.3 "Headline figures")
compare estimators at equal numbers of Gibbs sweeps per chain: AIS and RAISE get as many
temperatures as the sweeps (``K`` temperatures cost ``K − 1`` sweeps per AIS chain and ``K``
per reverse RAISE chain), and the tempered-sampling estimators (RTS, TS, TI, TI-RB, MBAR)
split the sweeps between their initial iterations and the long run (:func:`tempered_budget`).
Each estimator's record says what a matched budget is for it (``matched``; AIS and RAISE use
:func:`annealing_matched`, the tempered methods :func:`tempered_budget`);
``boltzlab evaluate --budget`` and the accuracy reproductions call :func:`matched_options`.
"""

from __future__ import annotations

from typing import Any

from boltzlab.errors import ValidationError
from boltzlab.estimators.ais_budget import DEFAULT_CHAINS
from boltzlab.estimators.record import find_record, records
from boltzlab.validation import check_positive_int

__all__ = ["ais_matched", "annealing_matched", "matched_options", "tempered_budget"]


def annealing_matched(sweeps_per_chain: int) -> dict[str, int]:
    """An annealing method at ``sweeps_per_chain``: that many temperatures (RTS paper, Fig. 3)."""
    return {"n_temperatures": sweeps_per_chain}


def ais_matched(sweeps_per_chain: int) -> dict[str, int]:
    """AIS at ``sweeps_per_chain``: that many temperatures and a fixed ``DEFAULT_CHAINS`` chains.

    A matched budget is a kept budget: AIS's chain budget would add chains.
    """
    return {"n_temperatures": sweeps_per_chain, "n_chains": DEFAULT_CHAINS}


def tempered_budget(
    total_sweeps: int, *, n_initial_iterations: int = 10, initial_sweeps: int = 50
) -> dict[str, int]:
    """Options of the tempered-sampling estimators that spend at most ``total_sweeps`` per chain.

    A tenth goes to the pilot annealing run that places the default ladder
    (``pilot_temperatures``; the pilot runs as many chains as the estimate, see
    :mod:`boltzlab.estimators.tempered_budget`). Of the rest, the paper's initial phase
    (``n_initial_iterations`` of ``initial_sweeps``, 10 × 50) is shrunk to at most half, and
    the long run gets what is left. The initial phase may stop early, so the cost actually
    spent (the estimate's ``cost_sweeps``) can be lower; a given ``n_sweeps`` fixes the budget
    to one round.

    Parameters
    ----------
    total_sweeps : int
        Sweeps per chain; what is left after the pilot must be at least
        ``2·n_initial_iterations``.
    n_initial_iterations, initial_sweeps : int, default 10 and 50
        The initial phase at full size.

    Returns
    -------
    dict
        ``pilot_temperatures``, ``n_initial_iterations``, ``initial_sweeps`` and ``n_sweeps``
        (the long run), whose ``pilot_temperatures + n_initial_iterations·initial_sweeps +
        n_sweeps`` equals ``total_sweeps``.

    Examples
    --------
    >>> tempered_budget(1000)
    {'pilot_temperatures': 100, 'n_initial_iterations': 10, 'initial_sweeps': 45, 'n_sweeps': 450}
    """
    total_sweeps = check_positive_int(total_sweeps, "total_sweeps")
    pilot = max(1, total_sweeps // 10)
    sampling = total_sweeps - pilot
    if sampling < 2 * n_initial_iterations:
        raise ValidationError(
            f"a tempered estimator needs more than {2 * n_initial_iterations} sweeps per chain "
            f"(a pilot, {n_initial_iterations} initial iterations and a long run), got {total_sweeps}"
        )
    per_iteration = min(initial_sweeps, sampling // (2 * n_initial_iterations))
    return {
        "pilot_temperatures": pilot,
        "n_initial_iterations": n_initial_iterations,
        "initial_sweeps": per_iteration,
        "n_sweeps": sampling - n_initial_iterations * per_iteration,
    }


def matched_options(method: str, sweeps_per_chain: int) -> dict[str, Any]:
    """Estimator options that cost ``sweeps_per_chain`` Gibbs sweeps per chain (the papers' x-axis).

    What that means is the method's record's ``matched``: AIS and RAISE get that many
    temperatures (RTS paper, Fig. 3: "as many temperatures as RTS's total sweeps"), AIS with a
    fixed 100 chains (no chain budget); the tempered-sampling methods get
    :func:`tempered_budget`; ``"exact"`` takes none. Anchored AIS gets AIS's temperatures; its
    anchor chains' fixed 200,000 chain-sweeps come on top (its ``cost_sweeps`` counts them, so
    a table shows the difference).

    Parameters
    ----------
    method : str
        Any case.
    sweeps_per_chain : int

    Returns
    -------
    dict
        Keyword arguments for :func:`boltzlab.estimate_log_z`.
    """
    record = find_record(method)
    if record is not None and record.family == "exact":
        return {}
    if record is None or record.matched is None:
        defined = ", ".join(["exact", *(r.name for r in records() if r.matched is not None)])
        raise ValidationError(
            f"no matched budget is defined for method {method!r}; it is defined for {defined}"
        )
    return record.matched(check_positive_int(sweeps_per_chain, "sweeps_per_chain"))

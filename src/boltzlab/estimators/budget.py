"""Estimator options at a matched cost: Gibbs sweeps per chain, the x-axis of the papers' figures.

Carlson, Stinson, Pakman & Paninski (2016, Fig. 3; docs/algorithms.md §4.3 "Headline figures")
compare estimators at equal numbers of Gibbs sweeps per chain: AIS and RAISE get as many
temperatures as the sweeps (``K`` temperatures cost ``K − 1`` sweeps per AIS chain and ``K``
per reverse RAISE chain), and the tempered-sampling estimators (RTS, TS, TI, TI-RB, MBAR)
split the sweeps between their initial iterations and the long run
(:func:`~boltzlab.estimators.tempered.budget.tempered_budget`). Each estimator's record says
what a matched budget is for it (``matched``); ``boltzlab evaluate --budget`` and the accuracy
reproductions call :func:`matched_options`, which reads it.
"""

from __future__ import annotations

from typing import Any

from boltzlab.errors import ValidationError
from boltzlab.estimators.record import find_record, records
from boltzlab.validation import check_positive_int

__all__ = ["matched_options"]


def matched_options(method: str, sweeps_per_chain: int) -> dict[str, Any]:
    """Estimator options that cost ``sweeps_per_chain`` Gibbs sweeps per chain (the papers' x-axis).

    What that means is the method's record's ``matched``: AIS and RAISE get that many
    temperatures (RTS paper, Fig. 3: "as many temperatures as RTS's total sweeps"), AIS with a
    fixed 100 chains (no chain budget); the tempered-sampling methods get
    :func:`~boltzlab.estimators.tempered.budget.tempered_budget`; ``"exact"`` takes none. Anchored AIS gets AIS's temperatures; its
    anchor chains' fixed 200,000 chain-sweeps come on top (its ``cost_sweeps`` counts them, so
    a table shows the difference), as do RAISE's schedule check's ``⌈K/4⌉`` more per chain
    (``schedule_check=False`` leaves them out, as the RTS paper's figures do).

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

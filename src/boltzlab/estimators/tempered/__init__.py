"""Tempered-sampling estimators on a ladder in temperature: RTS, TS, TI, TI-RB and MBAR.

Carlson, Stinson, Pakman & Paninski (2016) and the methods it compares with (docs/algorithms.md
§4.3–4.5). All read the same collected samples (:mod:`~boltzlab.estimators.tempered.samples`)
and grow the same budget (:mod:`~boltzlab.estimators.tempered.budget`, whose
``register_tempered`` files a new variant with what the family shares); their part of the
verdict is :func:`~boltzlab.estimators.tempered.checks.tempered_verdict_checks`.
"""

from boltzlab.estimators.tempered.budget import register_tempered, tempered_budget
from boltzlab.estimators.tempered.mbar import MBARInfo, mbar
from boltzlab.estimators.tempered.rts import RTSInfo, rts, ts
from boltzlab.estimators.tempered.samples import TemperedSamples, collect_tempered_samples
from boltzlab.estimators.tempered.ti import TIInfo, ti, ti_rb

__all__ = [
    "MBARInfo",
    "RTSInfo",
    "TIInfo",
    "TemperedSamples",
    "collect_tempered_samples",
    "mbar",
    "register_tempered",
    "rts",
    "tempered_budget",
    "ti",
    "ti_rb",
    "ts",
]

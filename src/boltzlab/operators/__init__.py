"""Transition operators: how one chain moves, one sweep of every layer at per-chain β.

``get(name, **params)`` builds one by name: ``"gibbs"``, ``"flip"``, ``"mixture"``.
"""

from boltzlab.operators.base import LayerwiseOperator, Operator, StepInfo, available, get, register, resolve
from boltzlab.operators.flip import FlipOperator
from boltzlab.operators.gibbs import GibbsOperator
from boltzlab.operators.hmc import HMCOperator
from boltzlab.operators.mixture import MixtureOperator

__all__ = [
    "FlipOperator",
    "GibbsOperator",
    "HMCOperator",
    "LayerwiseOperator",
    "MixtureOperator",
    "Operator",
    "StepInfo",
    "available",
    "get",
    "register",
    "resolve",
]

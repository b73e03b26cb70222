"""The real-valued front end: a Gaussian-binary RBM on grey-level images feeding a DBM.

Salakhutdinov & Hinton (2009, *Deep Boltzmann machines*, AISTATS, §4.2), on grey-level MNIST or
Fashion-MNIST:

* :mod:`~boltzlab_experiments.front_end.config` — settings (TOML presets ``tiny``, ``scaled``);
* :mod:`~boltzlab_experiments.front_end.pixels` — pooling, dropping constant pixels,
  standardising;
* :mod:`~boltzlab_experiments.front_end.run` — the two stages and their baselines;
* :mod:`~.report`, :mod:`~.command` — the files and ``boltzlab reproduce front-end``.
"""

from boltzlab_experiments.front_end.config import FrontEndConfig
from boltzlab_experiments.front_end.pixels import Standardizer
from boltzlab_experiments.front_end.run import FrontEndResult, LogZReport, run_front_end

__all__ = ["FrontEndConfig", "FrontEndResult", "LogZReport", "Standardizer", "run_front_end"]

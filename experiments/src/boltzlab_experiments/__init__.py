"""boltzlab-experiments: the source papers' demonstrations and studies, re-run with boltzlab.

One sub-package per study, each holding its computations (pure functions returning frozen
dataclasses), its report (CSV, markdown, ``summary.md``), its figures, its command and its
sizes as TOML presets (``presets/tiny.toml``, ``scaled.toml``, ``full.toml``):

* :mod:`boltzlab_experiments.two_node` — the CAST paper's two-node demonstration
  (Salakhutdinov 2010): Gibbs, FPCD and Wang-Landau on a two-node MRF;
* :mod:`boltzlab_experiments.flip_the_state` — the flip-the-state study (Brügge, Fischer &
  Igel 2013): SLEM fractions, learning curves with a Wilcoxon test, autocorrelation times,
  mode hopping, and verdicts on the paper's claims;
* :mod:`boltzlab_experiments.rts_tracking` — log-likelihood tracking with RTS during
  training against AIS checkpoints, and its cost (Carlson et al. 2016, §4.4);
* :mod:`boltzlab_experiments.accuracy` — the estimator-accuracy benchmarks: RTS vs AIS and
  RAISE, estimators vs K (Carlson et al. 2016, Figs. 3–4), AIS schedules (Kiwaki 2015);
* :mod:`boltzlab_experiments.cast_comparison` — SAP, FPCD and CAST learning of a DBM
  (Salakhutdinov 2010, Table 1, Fig. 5);
* :mod:`boltzlab_experiments.front_end` — a Gaussian-binary RBM on grey-level images feeding
  a DBM (Salakhutdinov & Hinton 2009, §4.2).

The commands reach ``boltzlab reproduce NAME`` through the ``boltzlab.reproduce`` entry points
this package declares; the library never imports it. Shared pieces: :mod:`~.presets` (TOML
presets), :mod:`~.findings` (verdicts), :mod:`~.tables` (files), :mod:`~.cli` (options,
threads, progress).
"""

__all__: list[str] = []

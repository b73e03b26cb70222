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

__all__ = ["REPRODUCE_HELP"]

#: Each reproduction's help line, the one ``boltzlab reproduce --help`` lists: read from here
#: (this package stays light to import) so that listing them does not import the studies, which
#: import torch (boltzlab.cli.reproduce, ``HELP_ATTRIBUTE``). Each command declares its
#: ``short_help`` from this table; experiments/tests/test_entry_points.py checks that they agree.
REPRODUCE_HELP = {
    "two-node": "The CAST paper's two-node MRF: Gibbs, FPCD and Wang-Landau.",
    "flip-the-state": "Does flip-the-state beat Gibbs where the paper says (Brügge et al. 2013)?",
    "rts-tracking": "Track the log-likelihood with RTS during training (Carlson et al. 2016, §4.4).",
    "rts-vs-ais": "RTS vs AIS and RAISE at matched sweeps (RTS Fig. 3).",
    "estimators-vs-k": "RTS, TS, TI, TI-RB, MBAR against K (RTS Fig. 4).",
    "varopt": "AIS schedules' log Z and ESS (Kiwaki 2015).",
    "cast": "SAP, FPCD and CAST learning of a DBM (Salakhutdinov 2010, Table 1).",
    "front-end": "A Gaussian-binary RBM front end feeding a DBM (Salakhutdinov & Hinton 2009).",
}

"""Training: how parameters move — data term − model term, stepped by ``torch.optim``.

``train(model, data, algorithm="cd" | "pcd" | "fpcd" | "pt" | "ast" | "cast" | "trans-sap" | "pl",
operator="gibbs" | "flip" | "mixture", ...)``
runs CD-k (Hinton 2002) or PCD-k (Tieleman 2008) with any transition operator, or maximum
pseudo-likelihood. The negative phase is a pluggable :class:`NegativePhase`; the data term is
the model's :class:`Objective`; centring, penalties and sample weights shape the update
(docs/training.md); callbacks track, log, checkpoint and stop.
"""

from boltzlab.training import gaussian_objective as gaussian_objective  # registers its objective
from boltzlab.training import mean_field_objective as mean_field_objective  # registers its objective
from boltzlab.training import potts_objective as potts_objective  # registers its objective
from boltzlab.training import pseudo_likelihood as pseudo_likelihood  # registers "pl"
from boltzlab.training import spin_objective as spin_objective  # registers its objectives
from boltzlab.training.adaptive_tempering import (  # registers "ast"
    AdaptiveTemperingLearning,
    AdaptiveTemperingLearningState,
)
from boltzlab.training.callbacks import (
    Callback,
    Checkpointer,
    CSVLogger,
    EarlyStopping,
    ExactLikelihoodTracker,
    ProgressBar,
    RunView,
)
from boltzlab.training.cd import CDState, ContrastiveDivergence
from boltzlab.training.centering import Centering, Offsets
from boltzlab.training.fpcd import FastPersistentContrastiveDivergence, FastPersistentState, with_parameters
from boltzlab.training.likelihood_tracker import RTSLikelihoodTracker
from boltzlab.training.negative import (
    NegativePhase,
    NegativePhaseBase,
    available_phases,
    chains_from_tensors,
    chains_to_tensors,
    get_phase,
    register_phase,
)
from boltzlab.training.objective import (
    Objective,
    RBMObjective,
    SufficientStatistics,
    objective_for,
    register_objective,
)
from boltzlab.training.optim import (
    ConstantSchedule,
    InverseSchedule,
    LinearSchedule,
    make_optimizer,
    make_schedule,
    make_scheduler,
)
from boltzlab.training.pcd import PersistentContrastiveDivergence, PersistentState
from boltzlab.training.penalties import Penalties
from boltzlab.training.pseudo_likelihood import PseudoLikelihoodObjective, PseudoLikelihoodPhase
from boltzlab.training.state import (
    TrainConfig,
    TrainRecord,
    TrainResult,
    TrainState,
    find_latest_checkpoint,
)
from boltzlab.training.tempered import SchemePhase, SchemePhaseState  # registers "pt", "cast", "trans-sap"
from boltzlab.training.tracking import RTSTracking, RTSTrackingState  # registers "rts"
from boltzlab.training.trainer import train

__all__ = [
    "AdaptiveTemperingLearning",
    "AdaptiveTemperingLearningState",
    "CDState",
    "CSVLogger",
    "Callback",
    "Centering",
    "Checkpointer",
    "ConstantSchedule",
    "ContrastiveDivergence",
    "EarlyStopping",
    "ExactLikelihoodTracker",
    "FastPersistentContrastiveDivergence",
    "FastPersistentState",
    "InverseSchedule",
    "LinearSchedule",
    "NegativePhase",
    "NegativePhaseBase",
    "Objective",
    "Offsets",
    "Penalties",
    "PersistentContrastiveDivergence",
    "PersistentState",
    "ProgressBar",
    "PseudoLikelihoodObjective",
    "PseudoLikelihoodPhase",
    "RBMObjective",
    "RTSLikelihoodTracker",
    "RTSTracking",
    "RTSTrackingState",
    "RunView",
    "SchemePhase",
    "SchemePhaseState",
    "SufficientStatistics",
    "TrainConfig",
    "TrainRecord",
    "TrainResult",
    "TrainState",
    "available_phases",
    "chains_from_tensors",
    "chains_to_tensors",
    "find_latest_checkpoint",
    "get_phase",
    "make_optimizer",
    "make_schedule",
    "make_scheduler",
    "objective_for",
    "register_objective",
    "register_phase",
    "train",
    "with_parameters",
]

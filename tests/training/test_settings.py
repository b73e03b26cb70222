"""setting_record: the JSON-able record of negative-phase options."""

import json

import numpy as np
import torch

from boltzlab.tempering.ladders import Ladder
from boltzlab.training.settings import setting_record


def test_setting_record_turns_every_kind_of_option_into_json() -> None:
    betas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    assert setting_record(None) is None
    assert setting_record("exp2beta") == "exp2beta"
    assert setting_record(3) == 3
    assert setting_record(torch.tensor([[1.0, 2.0]])) == [1.0, 2.0]
    assert setting_record(np.array([0.25, 0.75])) == [0.25, 0.75]
    assert setting_record((1, torch.tensor([0.5]))) == [1, [0.5]]
    assert setting_record(Ladder(betas)) == [0.0, 0.5, 1.0]

    def schedule(t: int) -> float:
        return 1.0 / (t + 1)

    assert setting_record(schedule) == repr(schedule)
    json.dumps([setting_record(value) for value in (None, "a", 1, betas, Ladder(betas), schedule)])

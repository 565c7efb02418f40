"""The job's analysis (training/job.py `analyse`, what the next prompt reads) states where the object ended relative
to the scene's fixed features: the rollouts reach the feedback with the features their resets placed (issue 40 item 1)."""

from __future__ import annotations

import numpy as np

from policies.reward_program import SparseReward
from sim_envs import get_task
from text2reward.runs.records import read_result
from text2reward.training.job import analyse


class HandStill:
    """A policy that never moves: the puck stays where the reset put it, in front of the wall."""

    def predict(self, observation, deterministic=True):
        return np.zeros(4), None


def test_the_feedback_relates_the_puck_to_the_wall_and_the_table():
    result = {"final_eval": {"episodes": [{"success": False}] * 3}, "success_rate": 0.0, "final_eval_episodes": 3, "curve": []}
    record = analyse(get_task("metaworld/push-wall-v3"), HandStill(), SparseReward(), 0, 2, read_result(result))
    text = record.feedback_text
    assert "object blocked by the wall (ended on the side it started on, within 4 cm of it): 0 of 2 episodes" in text
    assert "object ended past the wall (on its other side from where it started): 0 of 2 episodes" in text
    assert "object fell off the table (ended beyond its edges or more than 5 cm below its top): 0 of 2 episodes" in text
    assert "object's distance to the wall at the end (m; 0 inside its box): 0.1" in text  # the puck starts ~10 cm before it
    assert record.facts["object_past_wall"] == 0.0 and 0.05 < record.facts["object_wall_gap"] < 0.2

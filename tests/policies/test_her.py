"""Hindsight experience replay (`t2r train --her`, policies/her.py): relabelled rewards agree with the rewards paid
at real steps, a tiny HER run trains (SBX and SB3) and its saved policy is evaluated, and what cannot be relabelled
is refused in one line."""

import json

import numpy as np
import pytest
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv
from typer.testing import CliRunner

from policies.her import flat_observations, her_buffer_size
from policies.reward_program import ExpertReward, SparseReward
from policies.task_env import make_task_env
from policies.train import RESULT_FILE, TrainConfig, load_policy, train
from sim_envs import codec, get_task, list_tasks
from sim_envs.errors import ConfigError
from text2reward.cli import app
from text2reward.training.job import read_job

TINY = ["--steps", "300", "--eval-freq", "300", "--eval-episodes", "1", "--device", "cpu",
        "--hp", "learning_starts=100", "--hp", "batch_size=32"]


def rollout(task_id: str, reward, seed: int = 0):
    """Real steps of a multi-goal task, unflattened as HER trains on it: random actions, except fetch/reach, which is
    driven towards its goal with noise so that the goal test both holds and fails along the way (two episodes).
    Returns (env, achieved, desired, rewards)."""
    env = make_task_env(get_task(task_id), reward, seed=seed, flatten=False)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    achieved, desired, rewards = [], [], []
    for episode in range(2 if task_id.startswith("fetch/") else 1):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            action = env.action_space.sample()
            if task_id == "fetch/reach":
                action[:3] = np.clip(10 * (obs["desired_goal"] - obs["achieved_goal"]) + rng.normal(0, 0.6, 3), -1, 1)
            obs, reward, terminated, truncated, info = env.step(action)
            achieved.append(obs["achieved_goal"])
            desired.append(obs["desired_goal"])
            rewards.append(reward)
            done = terminated or truncated
    return env, np.array(achieved), np.array(desired), np.array(rewards)


MULTI_GOAL = [task.id for task in list_tasks() if task.is_multi_goal]
RELABELLED = [(task_id, "sparse") for task_id in MULTI_GOAL] + [(task_id, "expert") for task_id in MULTI_GOAL
                                                                if get_task(task_id).has_expert_reward]


def test_the_relabelling_check_covers_fetch():
    assert {"fetch/reach", "fetch/push"} <= set(MULTI_GOAL)


@pytest.mark.parametrize("task_id, reward_name", RELABELLED)
def test_relabelled_rewards_equal_the_rewards_paid_at_real_steps(task_id, reward_name):
    """HerReplayBuffer scores replayed steps through the VecEnv's `env_method("compute_reward", ...)`, which must find
    the wrapper's (the chosen reward), not the inner env's own; for the goal a step was aiming at it must pay exactly
    what the step paid, or replayed and real transitions would disagree. Every multi-goal task, both built-in rewards."""
    reward = SparseReward() if reward_name == "sparse" else ExpertReward()
    env, achieved, desired, rewards = rollout(task_id, reward)
    vec = DummyVecEnv([lambda: Monitor(env)])  # the wrappers training puts around the env
    for _ in range(2):  # the expert's first batch is checked against the env's one-goal reward, the second is not
        [relabelled] = vec.env_method("compute_reward", achieved, desired, [{} for _ in rewards], indices=[0])
        assert relabelled.shape == rewards.shape
        np.testing.assert_allclose(relabelled.astype(np.float32), rewards.astype(np.float32), rtol=1e-6, atol=1e-6)
    hindsight = env.compute_reward(achieved, achieved, [{}] * len(rewards))  # the goal a step achieved
    if reward_name == "sparse":
        assert set(np.unique(rewards)) <= {0.0, 1.0} and (hindsight == 1.0).all()
        if task_id == "fetch/reach":
            assert 0 < rewards.sum() < len(rewards), "the driven reach rollout should both reach the goal and miss it"
    else:
        assert (rewards < 0).all()
        np.testing.assert_allclose(hindsight, 0.0, atol=1e-6)
    vec.close()


def test_a_her_run_trains_and_its_saved_policy_is_evaluated(tmp_path):
    """`t2r train --her` on fetch/reach (SBX's SAC, the family's): dict observations, MultiInputPolicy, result.json says
    so, and `t2r evaluate` rebuilds the env the policy reads."""
    out = tmp_path / "her"
    outcome = CliRunner().invoke(app, ["train", "--task", "fetch/reach", "--reward", "sparse", "--her", "--out", str(out), *TINY])
    assert outcome.exit_code == 0, outcome.output
    data = json.loads((out / RESULT_FILE).read_text())
    assert data["her"] is True and data["algo"] == "sbx-sac" and data["steps"] == 300
    assert data["hyperparams"]["her"] is True and data["hyperparams"]["policy"] == "MultiInputPolicy"
    assert data["hyperparams"]["her_kwargs"] == {"n_sampled_goal": 4, "goal_selection_strategy": "future"}
    assert data["hyperparams"]["algo_kwargs"]["buffer_size"] == her_buffer_size(10**6, 300, 1) == 301
    model, meta = load_policy(out)
    assert not flat_observations(meta) and set(model.observation_space.spaces) == {"observation", "achieved_goal", "desired_goal"}
    evaluated = CliRunner().invoke(app, ["evaluate", "--model", str(out), "--episodes", "2"])
    assert evaluated.exit_code == 0, evaluated.output
    assert "fetch/reach: success rate" in evaluated.output


class CountingSparse(SparseReward):
    """The sparse reward, counting the replayed steps it scores (HER really relabels)."""

    relabelled = 0

    def relabel(self, achieved, desired, infos, task, env):
        CountingSparse.relabelled += len(achieved)
        return super().relabel(achieved, desired, infos, task, env)


def test_sb3_sac_trains_with_her_and_relabels_through_the_reward(tmp_path):
    CountingSparse.relabelled = 0
    config = TrainConfig(task_id="fetch/reach", out_dir=tmp_path, reward="sparse", steps=200, algo="sac", eval_freq=200,
                         eval_episodes=1, device="cpu", her=True, overrides={"learning_starts": 100, "batch_size": 20})
    result = train(config, reward_fn=CountingSparse())
    assert result.her and result.algo == "sac" and result.steps == 200
    # 100 updates of 20 samples, 4 of every 5 replayed with another goal
    assert CountingSparse.relabelled == 100 * 16
    model, _ = load_policy(tmp_path)
    assert type(model).__module__.startswith("stable_baselines3.")


def test_the_family_default_and_no_her(tmp_path):
    """Without a flag, the family's YAML decides; another implementation of SAC keeps it, PPO never has it; --no-her is off;
    older results read as flat."""
    from policies.her import resolve_her
    from policies.hyperparams import load_hyperparams

    task = get_task("fetch/reach")
    assert isinstance(load_hyperparams("fetch").her, bool) and load_hyperparams("fetch", "sac").her == load_hyperparams("fetch").her
    assert load_hyperparams("fetch", "ppo").her is False
    assert resolve_her(None, False, task, "sbx-sac", relabels=True) is False
    assert resolve_her(None, True, task, "sbx-sac", relabels=True) is True
    assert resolve_her(None, True, task, "sbx-sac", relabels=False) is False  # a program quietly keeps the flat buffer
    assert resolve_her(None, True, task, "ppo", relabels=True) is False
    assert resolve_her(False, True, task, "sbx-sac", relabels=True) is False
    assert flat_observations({"task": "fetch/reach"})  # a result.json written before HER existed
    with pytest.raises(ConfigError, match="--hp her is set with --her / --no-her"):
        load_hyperparams("fetch", None, {"her": True})


def test_a_program_reward_is_not_relabelled_even_when_asked_directly():
    """Defence in depth behind the refusals: the wrapper never falls through to the inner env's compute_reward."""
    from policies.reward_program import ProgramReward

    program = ProgramReward("def compute_dense_reward(self, action):\n    return 0.0, {}\n", name="mine")
    env = make_task_env(get_task("fetch/reach"), program, seed=0, flatten=False)
    with pytest.raises(ConfigError, match="reward 'mine' cannot be relabelled"):
        env.get_wrapper_attr("compute_reward")(np.zeros((2, 3)), np.zeros((2, 3)), [{}, {}])
    env.close()


@pytest.mark.parametrize("args, message", [
    (["--task", "fetch/reach", "--reward", "PROGRAM", "--her"], "--her cannot relabel a reward program: it reads the whole state view"),
    (["--task", "fetch/reach", "--reward", "PROGRAM", "--reward-mode", "potential", "--her"], "--her cannot relabel --reward-mode potential"),
    (["--task", "fetch/reach", "--reward", "sparse", "--algo", "ppo", "--her"], "--her needs an off-policy algorithm (SAC): PPO"),
    (["--task", "hopper/forward", "--reward", "sparse", "--algo", "sac", "--her"],
     "--her needs a multi-goal task (observations with an achieved and a desired goal), and hopper/forward has no goals"),
    (["--task", "metaworld/reach-v3", "--reward", "sparse", "--her"], "metaworld/reach-v3 has no goals; drop --her"),
    (["--task", "fetch/reach", "--reward", "sparse", "--her", "--hp", "learning_starts=10"],
     "--her replays whole episodes, so learning_starts must be at least one episode per env (50 x 1 = 50 steps), got 10"),
    (["--task", "fetch/reach", "--hp", "her=true"], "--hp her is set with --her / --no-her, not --hp"),
])
def test_what_cannot_be_relabelled_is_refused_in_one_line(tmp_path, args, message):
    program = tmp_path / "mine.py"
    program.write_text("def compute_dense_reward(self, action):\n    return 0.0, {}\n\ndef compute_potential(self):\n    return 0.0, {}\n")
    args = [str(program) if a == "PROGRAM" else a for a in args]
    outcome = CliRunner().invoke(app, ["train", *args, "--out", str(tmp_path / "out"), "--device", "cpu"])
    assert outcome.exit_code == 1, outcome.output
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], outcome.stderr
    assert not (tmp_path / "out").exists()


def test_her_travels_in_a_training_job_and_its_analysis_and_video_read_dicts(tmp_path):
    """The loop's worker: `her` goes through job.json (an older job.json without it reads as the family default), and
    the analysis rollouts and the video rebuild the unflattened env the HER policy reads."""
    from text2reward.training.job import DONE_FILE, TRAIN_DIR, TrainJob, execute

    config = TrainConfig(task_id="fetch/reach", out_dir=tmp_path / TRAIN_DIR, reward="sparse", steps=150, eval_freq=150,
                         eval_episodes=1, device="cpu", her=True, overrides={"learning_starts": 100, "batch_size": 16})
    job = TrainJob(train=config, analysis_episodes=1, video=True)
    job.write()
    again = read_job(json.loads((tmp_path / "job.json").read_text()))
    assert again.train.her is True
    old = {**codec.write(job), "train": {k: v for k, v in codec.write(job)["train"].items() if k != "her"}}
    assert read_job(old).train.her is None
    assert execute(again), (tmp_path / "error.json").read_text() if (tmp_path / "error.json").exists() else ""
    done = json.loads((tmp_path / DONE_FILE).read_text())
    assert done["result"]["her"] is True and not done.get("warnings"), done.get("warnings")
    assert done["feedback_text"] and done["video"]["frames"] > 0


def test_the_gymnasium_env_keeps_goals_for_her_when_asked():
    """`gym.make("text2reward/fetch-reach", flatten=False)`: the dict observation and the reward's relabelling, for a
    user's own SB3 HER loop."""
    import gymnasium as gym

    import text2reward.envs  # noqa: F401  (registers the tasks)

    env = gym.make("text2reward/fetch-reach", reward="sparse", flatten=False)
    obs, _ = env.reset(seed=0)
    assert isinstance(env.observation_space, gym.spaces.Dict) and set(obs) == {"observation", "achieved_goal", "desired_goal"}
    goals = np.stack([obs["achieved_goal"], obs["desired_goal"]])
    assert env.get_wrapper_attr("compute_reward")(goals, goals[::-1], [{}, {}]).tolist() == [0.0, 0.0]
    env.close()

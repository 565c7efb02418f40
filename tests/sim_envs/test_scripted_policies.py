"""Each MetaWorld scripted policy reaches success on its task, judged by the task's success test."""

from sim_envs import list_tasks

NATIVE_CAP = 500  # MetaWorld's own episode cap; our training episodes are shorter (see EPISODE_STEPS)


def _first_success(task, seed: int) -> int | None:
    env = task.make_env(seed=seed)
    raw = env.unwrapped  # beyond our 200-step TimeLimit, up to MetaWorld's own cap
    obs, _ = env.reset(seed=seed)
    view = task.view(env)
    policy = task.scripted_policy()
    for step in range(1, NATIVE_CAP + 1):
        obs, _, _, truncated, info = raw.step(policy(obs))
        view = task.view(env, view)
        if task.is_success(view, info):
            return step
        if truncated:
            return None
    return None


def test_every_scripted_policy_succeeds():
    failures = []
    for task in list_tasks("metaworld"):
        if all(_first_success(task, seed) is None for seed in (0, 1)):
            failures.append(task.id)
    assert not failures, f"scripted policies that never succeeded: {failures}"

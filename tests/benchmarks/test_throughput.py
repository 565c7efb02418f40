"""benchmarks/throughput.py --job-memory: the GPU memory of a job's own process, read from nvidia-smi's CSV."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "throughput.py"


def test_gpu_memory_is_summed_per_process_and_lines_without_numbers_are_skipped():
    spec = importlib.util.spec_from_file_location("throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    throughput = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(throughput)  # stdlib only at import: a configuration's libraries load in its own process
    sampled = "4242, 512\n17, 1024\n4242, 100\n[N/A], [N/A]\nNo running processes found\n"
    assert throughput.gpu_memory_by_pid(sampled) == {4242: 612, 17: 1024}
    assert throughput.gpu_memory_by_pid("") == {}


def test_workers_of_one_configuration_start_their_timed_windows_together(tmp_path):
    """`--workers K`: each job waits after its warm-up until all K have warmed up, so their timed windows overlap."""
    import threading

    spec = importlib.util.spec_from_file_location("throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    throughput = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(throughput)
    throughput.wait_for_the_others(str(tmp_path), 1)  # a lone job waits for nobody and leaves no mark
    assert list(tmp_path.iterdir()) == []
    waiting = threading.Thread(target=throughput.wait_for_the_others, args=(str(tmp_path), 2, 60.0))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive(), "a job went on before the other had warmed up"
    (tmp_path / "ready-other-job").touch()
    waiting.join(30)
    assert not waiting.is_alive()
    assert len(list(tmp_path.glob("ready-*"))) == 2


def test_phase_split_charges_each_call_to_its_own_phase_and_the_update_excludes_its_buffer_sample(monkeypatch):
    """`--phases`: a vector step's milliseconds split by phase. A fake clock moves only inside the fake calls, so the
    split is exact: the update's own time leaves out the buffer sample that SBX's `train` makes inside it."""
    from types import SimpleNamespace

    spec = importlib.util.spec_from_file_location("throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    throughput = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(throughput)
    clock = [0.0]
    monkeypatch.setattr(throughput.time, "perf_counter", lambda: clock[0])

    def costs(seconds: float, result=None):
        def call(*args, **kwargs):
            clock[0] += seconds
            return result
        return call

    model = SimpleNamespace(replay_buffer=SimpleNamespace(sample=costs(2.0), add=costs(0.25)), predict=costs(1.0, "action"))

    def train(gradient_steps: int, batch_size: int) -> None:
        model.replay_buffer.sample(batch_size * gradient_steps)  # SBX samples all its updates' rows first
        clock[0] += 5.0

    model.train = train
    env = SimpleNamespace(step_async=costs(0.5), step_wait=costs(3.0, "observations"))
    totals = dict.fromkeys(throughput.PHASES, 0.0)
    throughput.time_phases(model, env, totals)
    for _ in range(2):  # what SB3's loop calls per vector step
        assert model.predict("obs") == "action"
        env.step_async("action")
        assert env.step_wait() == "observations"
        model.replay_buffer.add()
        model.train(4, 256)
    assert totals == {"env_step": 7.0, "policy_act": 2.0, "buffer_add": 0.5, "buffer_sample": 4.0, "update": 10.0}

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

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

"""The reply cache (against the real test server), the file backend (files and a real stdin), the backend registry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import Fail, OpenAITestServer

from text2reward.errors import ConfigError, DuplicateChoice
from text2reward.generation.llm import (
    BackendError,
    BackendSettings,
    BackendSpec,
    CachedBackend,
    GenerationRequest,
    ReplyCache,
    backend_spec,
    default_cache_dir,
    register_backend,
)
from text2reward.generation.llm.file_backend import FileBackend
from text2reward.generation.llm.heuristic import HeuristicBackend
from text2reward.generation.llm.openai_backend import OpenAIBackend
from text2reward.runs.records import PromptContext

MESSAGES = [{"role": "system", "content": "Reward writer."}, {"role": "user", "content": "Open the drawer."}]
REPO = Path(__file__).resolve().parents[2]


def ask(n: int = 1, **fields) -> GenerationRequest:
    fields.setdefault("messages", MESSAGES)
    return GenerationRequest(n=n, task_id="metaworld/drawer-open-v3", **fields)


def openai_backend(url: str, **options) -> OpenAIBackend:
    settings = dict(max_retries=0, backoff_base=0.001, jitter=0.0, timeout=5.0)
    settings.update(options)
    return OpenAIBackend(settings.pop("model", "test-model"), base_url=url, **settings)


# ---- cache -------------------------------------------------------------------------------------
def test_cache_hit_makes_no_request_and_costs_no_tokens(tmp_path):
    with OpenAITestServer(script=["alpha", "beta", "gamma"], honour_n=False) as server:
        cached = CachedBackend(openai_backend(server.base_url), ReplyCache(tmp_path))
        fresh = cached.generate(ask(n=2))
        assert len(server.chat_requests) == 2
        again = cached.generate(ask(n=2))
        assert len(server.chat_requests) == 2  # served from disk
        more = cached.generate(ask(n=3))  # only the third sample is new
        assert len(server.chat_requests) == 3 and "n" not in server.chat_requests[-1]
    assert all(not r.cached and r.prompt_tokens > 0 for r in fresh)
    assert [r.text for r in again] == [r.text for r in fresh]
    assert all(r.cached and r.prompt_tokens == 0 and r.completion_tokens == 0 for r in again)
    assert [r.text for r in more] == [r.text for r in fresh] + ["gamma"]
    assert (cached.hits, cached.misses) == (4, 3)
    assert len(list(tmp_path.glob("*/*.json"))) == 3


def test_samples_after_the_cached_ones_get_their_own_seeds_and_draws(tmp_path):
    """A cache holding samples 0-1 asks for 2-3 as samples 2-3 (seed + 2, seed + 3), never as new 0-1."""
    with OpenAITestServer(default="reply", honour_n=False) as server:
        cached = CachedBackend(openai_backend(server.base_url, concurrency=1), ReplyCache(tmp_path / "openai"))
        cached.generate(ask(n=2, seed=7))
        cached.generate(ask(n=4, seed=7))
        seeds = [body["seed"] for body in server.chat_requests]
    assert seeds[-2:] == [9, 10] and sorted(seeds) == [7, 8, 9, 10]

    heuristic = CachedBackend(HeuristicBackend(seed=3), ReplyCache(tmp_path / "heuristic"))
    request = GenerationRequest(MESSAGES, n=4, task_id="fetch/reach", seed=3)
    heuristic.generate(GenerationRequest(MESSAGES, n=2, task_id="fetch/reach", seed=3))
    filled = [r.text for r in heuristic.generate(request)]
    uncached = [r.text for r in HeuristicBackend(seed=3).generate(request)]
    assert filled[2:] == uncached[2:] and len(set(filled)) == 4


def test_errors_are_never_cached(tmp_path):
    with OpenAITestServer(script=[Fail(500), "recovered"]) as server:
        cached = CachedBackend(openai_backend(server.base_url), ReplyCache(tmp_path))
        (failed,) = cached.generate(ask())
        (recovered,) = cached.generate(ask())
        (hit,) = cached.generate(ask())
        assert len(server.chat_requests) == 2
    assert failed.error is not None and recovered.text == "recovered" and hit.cached and hit.text == "recovered"


def test_key_covers_everything_that_shapes_a_sample(tmp_path):
    cache = ReplyCache(tmp_path)
    backend = openai_backend("http://127.0.0.1:9/v1")
    base = cache.key(backend, ask(), 0)
    assert cache.key(openai_backend("http://127.0.0.1:10/v1"), ask(), 0) == base  # the URL is not the model
    variants = [
        cache.key(backend, ask(), 1),
        cache.key(backend, ask(temperature=0.5), 0),
        cache.key(backend, ask(max_tokens=10), 0),
        cache.key(backend, ask(messages=MESSAGES[:1]), 0),
        cache.key(openai_backend("http://127.0.0.1:9/v1", model="other"), ask(), 0),
        cache.key(openai_backend("http://127.0.0.1:9/v1", extra_params={"seed": 1}), ask(), 0),
        cache.key(FileBackend(stdin=None), ask(), 0),
    ]
    assert len(set(variants + [base])) == len(variants) + 1
    # images count only for a vision model, and an image file is keyed by its content
    image = tmp_path / "frame.png"
    image.write_bytes(b"\x89PNG first")
    with_image = ask(context=PromptContext(images=[str(image)], critique="ignored by model backends"))
    assert cache.key(backend, with_image, 0) == base
    vision = openai_backend("http://127.0.0.1:9/v1", vision=True)
    first = cache.key(vision, with_image, 0)
    image.write_bytes(b"\x89PNG second")
    assert cache.key(vision, with_image, 0) != first


def test_unreadable_cache_entry_is_a_miss(tmp_path):
    with OpenAITestServer(script=["one", "two"]) as server:
        cache = ReplyCache(tmp_path)
        backend = CachedBackend(openai_backend(server.base_url), cache)
        backend.generate(ask())
        key = cache.key(backend.backend, ask(), 0)
        cache.path(key).write_text("{ half written")
        (reply,) = backend.generate(ask())
        assert len(server.chat_requests) == 2
    assert reply.text == "two" and not reply.cached
    assert json.loads(cache.path(key).read_text())["reply"]["text"] == "two"


def test_default_cache_dir_is_documented_and_overridable(monkeypatch, tmp_path):
    monkeypatch.setenv("T2R_CACHE_DIR", str(tmp_path / "mine"))
    assert default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("T2R_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "text2reward" / "replies"
    assert ReplyCache().directory == default_cache_dir()


# ---- file backend ------------------------------------------------------------------------------
def test_file_backend_reads_files_in_order_then_stops_or_cycles(tmp_path):
    for i, name in enumerate(["b.py", "a.py", "c.md"]):
        (tmp_path / name).write_text(f"reply {i}")
    (tmp_path / ".hidden").write_text("never")
    backend = FileBackend(tmp_path)
    first = backend.generate(ask(n=2))
    assert [r.text for r in first] == ["reply 1", "reply 0"]  # a.py, b.py: name order
    assert all((r.backend, r.model, r.prompt_tokens) == ("file", "file", 0) for r in first)
    assert [r.text for r in backend.generate(ask())] == ["reply 2"]
    with pytest.raises(BackendError, match="add reply files"):
        backend.generate(ask())
    cycling = FileBackend([tmp_path / "a.py", tmp_path / "c.md"], cycle=True)
    assert [r.text for r in cycling.generate(ask(n=3))] == ["reply 1", "reply 2", "reply 1"]


def test_file_backend_reports_missing_and_empty_files(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        FileBackend(tmp_path / "nope.py")
    (tmp_path / "empty.py").write_text("  \n")
    (reply,) = FileBackend(tmp_path / "empty.py").generate(ask())
    assert reply.text is None and "empty" in reply.error


def _run_stdin_backend(n: int, text: str) -> subprocess.CompletedProcess:
    script = (
        "import json, sys\n"
        "from text2reward.generation.llm import BackendSettings, GenerationRequest, backend_spec\n"
        "messages = [{'role': 'user', 'content': 'Make the robot open the drawer.'}]\n"
        f"request = GenerationRequest(messages=messages, n={n}, task_id='metaworld/drawer-open-v3')\n"
        "replies = backend_spec('file').make(BackendSettings()).generate(request)\n"
        "from sim_envs.codec import write\n"
        "print(json.dumps([write(r) for r in replies]))\n"
    )
    return subprocess.run([sys.executable, "-c", script], input=text, capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def test_file_backend_reads_pasted_replies_from_stdin():
    done = _run_stdin_backend(2, "def compute_dense_reward(self, action):\n    return 1.0\n%%%\nsecond reply\n")
    assert done.returncode == 0, done.stderr
    replies = json.loads(done.stdout)
    assert [r["text"] for r in replies] == ["def compute_dense_reward(self, action):\n    return 1.0\n",
                                            "second reply\n"]
    assert all(r["model"] == "file" and r.get("error") is None for r in replies)
    assert "Make the robot open the drawer." in done.stderr and "paste reply 1 of 2" in done.stderr

    short = _run_stdin_backend(3, "only one\n")
    assert short.returncode != 0 and "BackendError" in short.stderr and "ask fewer samples" in short.stderr


# ---- the backend registry --------------------------------------------------------------------------
def test_each_built_in_spec_builds_its_backend_from_the_settings(tmp_path):
    (tmp_path / "r.py").write_text("x")
    backend = backend_spec("file").make(BackendSettings(reply_files=(str(tmp_path),), model=None))
    assert isinstance(backend, FileBackend) and backend.generate(ask())[0].text == "x"
    remote = backend_spec("openai").make(BackendSettings(model="m", base_url="http://127.0.0.1:9/v1", max_retries=None))
    assert isinstance(remote, OpenAIBackend) and remote.retry.max_retries == 4  # an unset setting keeps the default
    assert remote.model == "m" and remote.base_url.startswith("http://127.0.0.1:9/v1")
    assert backend_spec("openai").make(BackendSettings(model="m", base_url="http://127.0.0.1:9/v1", max_retries=0)).retry.max_retries == 0
    heuristic = backend_spec("heuristic").make(BackendSettings(seed=5))
    assert isinstance(heuristic, HeuristicBackend) and heuristic.seed == 5
    (tmp_path / "s.py").write_text("y")
    resumed = backend_spec("file").make(BackendSettings(reply_files=(str(tmp_path / "r.py"), str(tmp_path / "s.py")), replies_used=1))
    assert resumed.generate(ask())[0].text == "y"  # a resumed run goes on after the replies it used


def test_an_unknown_backend_names_the_choices_and_a_name_is_registered_once():
    with pytest.raises(ConfigError, match=r"^unknown --llm 'gpt': choose openai .*, heuristic .*, file "):
        backend_spec("gpt")
    original = backend_spec("file")
    with pytest.raises(DuplicateChoice, match="a backend named 'file' is registered already"):
        register_backend(BackendSpec(name="file", summary="(another)", build=lambda settings: FileBackend(stdin=None)))
    assert backend_spec("file") is original  # the registry is unchanged


def test_each_backend_has_one_label():
    assert backend_spec("heuristic").label(None) == "heuristic (rule-based, no language model)"
    assert backend_spec("heuristic").label("anything") == "heuristic (rule-based, no language model)"
    assert backend_spec("openai").label("gpt-4o") == "openai gpt-4o"
    assert backend_spec("file").label(None) == "file pasted replies"


def test_file_backend_is_never_cached(tmp_path):
    (tmp_path / "replies").mkdir()
    (tmp_path / "replies" / "r.py").write_text("x")
    cached = CachedBackend(FileBackend(tmp_path / "replies", cycle=True), ReplyCache(tmp_path / "cache"))
    assert cached.generate(ask())[0].text == "x" and not (tmp_path / "cache").exists()


def test_the_heuristic_spec_builds_a_rule_based_backend():
    backend = backend_spec("heuristic").make(BackendSettings(seed=0))
    assert backend.name == "heuristic" and backend.rule_based and backend_spec("heuristic").rule_based


def test_file_backend_resumes_after_the_replies_already_used(tmp_path):
    from text2reward.generation.llm.base import GenerationRequest
    from text2reward.generation.llm.file_backend import FileBackend

    first, second = tmp_path / "a.md", tmp_path / "b.md"
    first.write_text("reply A")
    second.write_text("reply B")
    resumed = FileBackend([first, second], start=1)
    (reply,) = resumed.generate(GenerationRequest(messages=[{"role": "user", "content": "x"}], n=1, task_id="fetch/reach"))
    assert reply.text == "reply B"

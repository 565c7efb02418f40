"""The openai backend against servers that behave like Ollama, llama.cpp and vLLM (real HTTP, real client).

Why: those servers run one request at a time, take minutes over a long reply, ignore or refuse `n`
and honour `seed`; the backend must not burst them, must stream, and must fail fast and clearly
when the server is not there.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openai
import pytest
from openai_server import OpenAITestServer, Say, count_words, pieces_of

from text2reward.generation.llm import BackendError, GenerationRequest
from text2reward.generation.llm.openai_backend import OpenAIBackend, check_endpoint, is_local_url

MESSAGES = [
    {"role": "system", "content": "You write dense reward functions."},
    {"role": "user", "content": "Write a reward for opening the drawer."},
]
CODE = "def compute_dense_reward(self, action):\n    return -float(self.distance)  # closer is better\n"


def make(server: OpenAITestServer, **options) -> OpenAIBackend:
    settings = dict(api_key="test-key", timeout=5.0, max_retries=2, backoff_base=0.001, backoff_max=0.01, jitter=0.0)
    settings.update(options)
    return OpenAIBackend(settings.pop("model", "test-model"), base_url=server.base_url, **settings)


def ask(n: int = 1, **fields) -> GenerationRequest:
    return GenerationRequest(messages=MESSAGES, n=n, task_id="metaworld/drawer-open-v3", **fields)


def free_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- the test server's own instruments ---------------------------------------------------------
def test_server_counts_requests_in_flight():
    with OpenAITestServer(default="ok", latency=0.2) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5.0)
        call = lambda: client.chat.completions.create(model="m", messages=MESSAGES)  # noqa: E731
        threads = [threading.Thread(target=call) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert (server.max_in_flight, server.in_flight) == (3, 0)


def test_server_streams_openai_chunks_with_usage_on_request():
    with OpenAITestServer(script=[Say(CODE), Say("no usage here")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5.0)
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                     stream_options={"include_usage": True}))
        bare = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == CODE and pieces_of(CODE)[0] == "def "
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == len(CODE.split())
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert all(c.usage is None for c in bare)


def test_presets_treat_n_like_the_real_servers():
    def choices(name: str) -> int | str:
        with OpenAITestServer.like(name, default=Say(["a", "b", "c"])) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5.0)
            try:
                return len(client.chat.completions.create(model="m", messages=MESSAGES, n=3).choices)
            except openai.APIStatusError as exc:
                return exc.status_code

    assert (choices("vllm"), choices("ollama"), choices("llamacpp")) == (3, 1, 500)
    with pytest.raises(ValueError, match="vllm"):
        OpenAITestServer.like("tgi")


# ---- defaults by endpoint ----------------------------------------------------------------------
def test_is_local_url():
    local = ["http://127.0.0.1:8000/v1", "http://localhost:11434/v1", "http://[::1]:8080/v1", "http://0.0.0.0:8000",
             "http://192.168.1.20:8000/v1", "http://10.0.0.5/v1", "http://gpu-box:8000/v1", "http://box.local/v1"]
    remote = ["https://api.openai.com/v1", "https://api.together.xyz/v1", "http://8.8.8.8/v1", None, ""]
    assert [is_local_url(u) for u in local] == [True] * len(local)
    assert [is_local_url(u) for u in remote] == [False] * len(remote)


def test_defaults_for_a_local_server_and_for_api_openai_com(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    local = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")
    remote = OpenAIBackend("m", api_key="sk-test")
    hosted = OpenAIBackend("m", base_url="https://api.together.xyz/v1", api_key="k")
    assert (local.concurrency, local.timeout, local.stream) == (1, 600.0, True)
    assert (remote.concurrency, remote.timeout, remote.stream) == (8, 60.0, False)
    assert (hosted.concurrency, hosted.timeout, hosted.stream) == (8, 600.0, False)
    chosen = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", concurrency=3, timeout=7, stream=False)
    assert (chosen.concurrency, chosen.timeout, chosen.stream) == (3, 7.0, False)
    assert OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", max_workers=4).concurrency == 4  # the old name
    assert local.cache_params() == chosen.cache_params() == remote.cache_params()  # transport shapes no reply


def test_bad_url_scheme_is_one_line():
    with pytest.raises(BackendError, match="http:// or https://") as caught:
        OpenAIBackend("m", base_url="127.0.0.1:8000/v1")
    assert "\n" not in str(caught.value)


# ---- concurrency -------------------------------------------------------------------------------
def test_concurrency_bounds_requests_in_flight_across_calls():
    with OpenAITestServer(default="ok", honour_n=False, latency=0.05) as server:
        backend = make(server, concurrency=2)
        replies: list = []
        callers = [threading.Thread(target=lambda: replies.extend(backend.generate(ask(n=3)))) for _ in range(2)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert len(server.chat_requests) >= 6
    assert len(replies) == 6 and all(r.text == "ok" for r in replies)
    assert server.max_in_flight == 2  # parallel, never past the bound


def test_local_default_sends_one_request_at_a_time_when_n_is_ignored():
    with OpenAITestServer.like("ollama", default="ok", latency=0.05) as server:
        backend = make(server)
        replies = backend.generate(ask(n=4))
        bodies = server.chat_requests
    assert backend.concurrency == 1 and server.max_in_flight == 1
    assert [b.get("n") for b in bodies] == [4, None, None, None]
    assert [r.text for r in replies] == ["ok"] * 4


# ---- streaming ---------------------------------------------------------------------------------
def test_streaming_assembles_text_and_usage():
    with OpenAITestServer(script=[Say(CODE)]) as server:
        backend = make(server)
        (reply,) = backend.generate(ask())
        (body,) = server.chat_requests
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert reply.text == CODE and reply.error is None
    assert (reply.prompt_tokens, reply.completion_tokens) == (count_words(MESSAGES), len(CODE.split()))


def test_streaming_with_n_keeps_each_choice_apart():
    with OpenAITestServer.like("vllm", script=[Say(["first reply here", "second", "third one"])]) as server:
        replies = make(server).generate(ask(n=3))
        (body,) = server.chat_requests
    assert body["n"] == 3 and body["stream"] is True
    assert [r.text for r in replies] == ["first reply here", "second", "third one"]
    assert sum(r.completion_tokens for r in replies) == 6


def test_streamed_reply_longer_than_the_timeout_still_arrives():
    # ~2 s in all, a word every 0.25 s against a 1 s timeout: a loaded machine may delay a word by much, not by 0.75 s
    slow = Say("one two three four five six seven eight", seconds_per_token=0.25)
    with OpenAITestServer(script=[slow]) as server:
        backend = make(server, timeout=1.0, max_retries=0)
        (streamed,) = backend.generate(ask())
    assert streamed.text == slow.text and streamed.latency_seconds > 1.0
    with OpenAITestServer(script=[slow]) as server:
        (waited,) = make(server, timeout=1.0, max_retries=0, stream=False).generate(ask())
    assert waited.text is None and "Timeout" in waited.error  # the same reply, unstreamed, times out


def test_a_stream_that_stalls_is_retried_and_logged(caplog):
    with OpenAITestServer(script=[Say("stalls after a word", seconds_per_token=4.0), Say("fast")]) as server:
        backend = make(server, timeout=1.0)  # the stall is 4x the timeout; a prompt reply has 1 s, under any load
        with caplog.at_level(logging.WARNING, logger="text2reward.generation.llm.openai_backend"):
            (reply,) = backend.generate(ask())
    assert reply.text == "fast"
    assert backend.stats == {"requests": 2, "retries": 1, "failed_calls": 0}
    assert any("Timeout" in r.message and "retry 1/2" in r.message for r in caplog.records)


def test_stream_options_refusal_falls_back_once_and_is_remembered():
    with OpenAITestServer(script=["one", "two"], rejects_stream_options=True) as server:
        backend = make(server)
        first = backend.generate(ask())
        second = backend.generate(ask())
        with_options = ["stream_options" in body for body in server.chat_requests]
    assert [r.text for r in first + second] == ["one", "two"]
    assert with_options == [True, False, False]
    assert first[0].completion_tokens == 0 and first[0].error is None  # no usage without stream_options
    assert backend.stats["requests"] == 3 and backend.stats["retries"] == 0


# ---- seeds -------------------------------------------------------------------------------------
def test_seed_is_sent_as_is_when_one_request_carries_n():
    with OpenAITestServer.like("vllm", script=[Say(["a", "b", "c"])]) as server:
        make(server).generate(ask(n=3, seed=7))
        (body,) = server.chat_requests
    assert (body["n"], body["seed"]) == (3, 7)


@pytest.mark.parametrize("server_kind", ["ollama", "llamacpp"])
def test_fanned_out_samples_get_seed_plus_i(server_kind):
    with OpenAITestServer.like(server_kind, default=Say(lambda body, i: f"seed {body.get('seed')}")) as server:
        backend = make(server, extra_params={"seed": 1, "top_p": 0.9})
        replies = backend.generate(ask(n=3, seed=100))
        unseeded = OpenAIBackend("m", base_url=server.base_url, stream=False).generate(ask())
        bodies = server.chat_requests
    singles = [b for b in bodies[:-1] if "n" not in b]
    assert [b["seed"] for b in singles] == ([101, 102] if server_kind == "ollama" else [100, 101, 102])
    assert bodies[0]["n"] == 3 and bodies[0]["seed"] == 100  # llama.cpp refuses it, once, with HTTP 500
    assert sorted(r.text for r in replies) == ["seed 100", "seed 101", "seed 102"]
    assert backend.stats["retries"] == 0 and all(b.get("top_p") == 0.9 for b in bodies[:-1])
    assert "seed" not in bodies[-1] and unseeded[0].text == "seed None"


# ---- check_endpoint ----------------------------------------------------------------------------
def test_check_endpoint_passes_for_a_served_model_or_a_server_that_lists_none():
    with OpenAITestServer(models=["qwen2.5-coder:7b", "llama3.1:8b"]) as server:
        check_endpoint(server.base_url, None, "llama3.1:8b")
    with OpenAITestServer() as server:
        check_endpoint(server.base_url, None, "whatever-is-loaded")
        assert [r.path for r in server.requests] == ["/v1/models"]


def test_check_endpoint_unreachable_port_is_one_line():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(BackendError) as caught:
        check_endpoint(url, None, "m", timeout=1.0)
    message = str(caught.value)
    assert message.startswith(f"cannot reach {url}; is the server running? (") and "\n" not in message


def test_check_endpoint_silent_server_times_out_quickly():
    with socket.socket() as listening:  # accepts connections (the backlog), never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        url = f"http://127.0.0.1:{listening.getsockname()[1]}/v1"
        with pytest.raises(BackendError, match="is the server running"):
            check_endpoint(url, None, "m", timeout=0.2)


def test_check_endpoint_names_the_served_models_when_ours_is_absent():
    with OpenAITestServer(models=["Qwen/Qwen2.5-7B-Instruct"]) as server:
        url = server.base_url
        with pytest.raises(BackendError) as caught:
            check_endpoint(url, None, "gpt-4o")
    message = str(caught.value)
    assert f"the server at {url} has no model 'gpt-4o'; it serves: Qwen/Qwen2.5-7B-Instruct" in message
    assert "--model" in message and "\n" not in message


def test_check_endpoint_bad_key_names_openai_api_key():
    with OpenAITestServer(api_key="right", models=["m"]) as server:
        with pytest.raises(BackendError, match="OPENAI_API_KEY") as caught:
            check_endpoint(server.base_url, "wrong", "m")
        check_endpoint(server.base_url, "right", "m")
    assert "401" in str(caught.value) and "\n" not in str(caught.value)


def test_check_endpoint_reads_the_environment_and_refuses_bad_schemes(monkeypatch):
    with OpenAITestServer(models=["env-model"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        check_endpoint(None, None, "env-model")
        assert len(server.requests) == 1
    with pytest.raises(BackendError, match="http:// or https://"):
        check_endpoint("ftp://127.0.0.1/v1", None, "m")



def test_check_endpoint_web_page_instead_of_an_api_is_one_line():
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body>a chat web UI, not its API</body></html>")

        def log_message(self, *args) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Page) as httpd:
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        try:
            with pytest.raises(BackendError, match="not answer GET /models like an OpenAI-compatible server") as caught:
                check_endpoint(f"http://127.0.0.1:{httpd.server_address[1]}/v1", None, "m")
        finally:
            httpd.shutdown()
    assert "--base-url" in str(caught.value) and "\n" not in str(caught.value)

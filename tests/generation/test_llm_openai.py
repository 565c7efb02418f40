"""The openai backend against a real HTTP server on 127.0.0.1, through the real `openai` client.

Every test runs twice: with plain JSON replies and streamed (SSE) ones, the default for a local server.
Behaviour specific to local servers (concurrency, streaming, seeds, check_endpoint) is in
test_llm_local_servers.py.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from openai_server import Delay, Fail, Malformed, OpenAITestServer, Say, count_words

from text2reward.generation.llm import BackendError, GenerationRequest
from text2reward.generation.llm.openai_backend import OpenAIBackend
from text2reward.runs.records import PromptContext

MESSAGES = [
    {"role": "system", "content": "You write dense reward functions."},
    {"role": "user", "content": "Write a reward for reaching the goal position."},
]
PROMPT_WORDS = count_words(MESSAGES)
STREAM = {"on": False}
"""Whether `make` builds a streaming backend: set per test by the `transport` fixture."""


@pytest.fixture(autouse=True, params=[False, True], ids=["json", "sse"])
def transport(request):
    STREAM["on"] = request.param
    yield request.param


def make(server: OpenAITestServer, **options) -> OpenAIBackend:
    settings = dict(api_key="test-key", timeout=5.0, max_retries=3, backoff_base=0.001, backoff_max=0.01, jitter=0.0,
                    stream=STREAM["on"])
    settings.update(options)
    return OpenAIBackend(settings.pop("model", "test-model"), base_url=server.base_url, **settings)


def ask(n: int = 1, **fields) -> GenerationRequest:
    return GenerationRequest(messages=MESSAGES, n=n, task_id="metaworld/reach-v3", **fields)


def png_bytes(value: int) -> bytes:
    import imageio.v3 as iio

    buffer = io.BytesIO()
    iio.imwrite(buffer, np.full((4, 5, 3), value, dtype=np.uint8), extension=".png")
    return buffer.getvalue()


def test_good_reply_reaches_the_caller_with_the_request_sent_as_given():
    code = "def compute_dense_reward(self, action):\n    return 0.0"
    with OpenAITestServer(script=[Say(code)]) as server:
        replies = make(server).generate(ask(temperature=0.3, max_tokens=256))
        (body,) = server.chat_requests
        auth = server.requests[0].headers.get("authorization")
    (reply,) = replies
    assert reply.text == code and reply.error is None
    assert (reply.backend, reply.model, reply.cached, reply.rule_based) == ("openai", "test-model", False, False)
    assert reply.latency_seconds > 0
    assert body["model"] == "test-model" and body["messages"] == MESSAGES
    assert body["temperature"] == 0.3 and body["max_tokens"] == 256 and "n" not in body
    assert auth == "Bearer test-key"


def test_n_honoured_is_one_request_and_usage_is_spread_exactly():
    with OpenAITestServer(script=[Say(["first one", "second", "third reply here"])]) as server:
        replies = make(server).generate(ask(n=3))
        bodies = server.chat_requests
    assert [r.text for r in replies] == ["first one", "second", "third reply here"]
    assert len(bodies) == 1 and bodies[0]["n"] == 3
    assert sum(r.prompt_tokens for r in replies) == PROMPT_WORDS
    assert sum(r.completion_tokens for r in replies) == 6


def test_n_ignored_falls_back_to_concurrent_single_requests_and_remembers():
    with OpenAITestServer(script=["a", "b", "c", "d", "e"], honour_n=False) as server:
        backend = make(server)
        first = backend.generate(ask(n=3))
        second = backend.generate(ask(n=2))
        bodies = server.chat_requests
    assert first[0].text == "a" and sorted(r.text for r in first) == ["a", "b", "c"]
    assert sorted(r.text for r in second) == ["d", "e"]
    assert all(r.error is None for r in first + second)
    assert [b.get("n") for b in bodies] == [3, None, None, None, None]


def test_rate_limit_then_success_is_retried():
    with OpenAITestServer(script=[Fail(429, retry_after=0), "ok"]) as server:
        backend = make(server)
        (reply,) = backend.generate(ask())
        assert len(server.chat_requests) == 2
    assert reply.text == "ok" and reply.error is None
    assert backend.stats == {"requests": 2, "retries": 1, "failed_calls": 0}


def test_server_error_storm_gives_error_replies_after_max_retries():
    with OpenAITestServer(default=Fail(500, "overloaded")) as server:
        backend = make(server, max_retries=2)
        replies = backend.generate(ask(n=2))
        assert len(server.chat_requests) == 3  # one call with n=2, retried twice; no fan-out
    assert len(replies) == 2 and all(r.text is None for r in replies)
    assert all("HTTP 500" in r.error and "3 attempts" in r.error for r in replies)
    assert backend.stats["failed_calls"] == 1


def test_malformed_json_is_retried():
    with OpenAITestServer(script=[Malformed(), "fine"]) as server:
        (reply,) = make(server).generate(ask())
        assert len(server.chat_requests) == 2
    assert reply.text == "fine"


def test_timeouts_are_retried_then_reported():
    # delays 4x the timeout; a prompt reply has a whole second, under any load
    with OpenAITestServer(script=[Delay(4.0), "after timeout"]) as server:
        (recovered,) = make(server, timeout=1.0).generate(ask())
    assert recovered.text == "after timeout"
    with OpenAITestServer(default=Delay(4.0)) as server:
        (failed,) = make(server, timeout=1.0, max_retries=1).generate(ask())
        assert len(server.chat_requests) == 2
    assert failed.text is None and "Timeout" in failed.error


def test_bad_key_raises_with_the_fix():
    with OpenAITestServer(script=["never"], api_key="the-right-key") as server:
        with pytest.raises(BackendError, match="OPENAI_API_KEY") as caught:
            make(server, api_key="a-wrong-key").generate(ask())
        assert len(server.chat_requests) == 1  # not retried
    assert "\n" not in str(caught.value) and "401" in str(caught.value)
    with OpenAITestServer(script=[401]) as server:
        with pytest.raises(BackendError, match="OPENAI_API_KEY"):
            make(server).generate(ask(n=2))


def test_unknown_model_raises_with_the_fix():
    with OpenAITestServer(script=["never"], models=["real-model"]) as server:
        with pytest.raises(BackendError, match="--model") as caught:
            make(server, model="missing-model").generate(ask())
        assert len(server.chat_requests) == 1
    message = str(caught.value)
    assert "missing-model" in message and "--base-url" in message and "\n" not in message
    with OpenAITestServer(script=[404]) as server:
        with pytest.raises(BackendError, match="--model"):
            make(server).generate(ask())


def test_bad_request_is_reported_without_retrying():
    with OpenAITestServer(script=[Fail(400, "context too long")]) as server:
        (reply,) = make(server).generate(ask())
        assert len(server.chat_requests) == 1
    assert reply.text is None and "context too long" in reply.error


def test_bad_request_for_n_falls_back_to_single_requests():
    with OpenAITestServer(script=[Fail(400, "n must be 1"), "x", "y"]) as server:
        replies = make(server).generate(ask(n=2))
        bodies = server.chat_requests
    assert sorted(r.text for r in replies) == ["x", "y"]
    assert [b.get("n") for b in bodies] == [2, None, None]


def test_token_counts_come_from_usage_or_are_zero():
    script = [Say("a b", prompt_tokens=11, completion_tokens=7), Say("c", usage=False),
              Say(["p", "q"], prompt_tokens=11, completion_tokens=7)]
    with OpenAITestServer(script=script) as server:
        backend = make(server)
        (counted,) = backend.generate(ask())
        (uncounted,) = backend.generate(ask())
        pair = backend.generate(ask(n=2))
    assert (counted.prompt_tokens, counted.completion_tokens) == (11, 7)
    assert (uncounted.prompt_tokens, uncounted.completion_tokens, uncounted.text) == (0, 0, "c")
    assert [(r.prompt_tokens, r.completion_tokens) for r in pair] == [(6, 4), (5, 3)]


def test_vision_images_reach_the_server_as_content_parts(tmp_path):
    on_disk = tmp_path / "keyframe.png"
    on_disk.write_bytes(png_bytes(200))
    images = [png_bytes(10), str(on_disk), np.zeros((3, 3, 3), dtype=np.uint8)]
    with OpenAITestServer(script=["seen", "blind"]) as server:
        make(server, vision=True).generate(ask(context=PromptContext(images=images)))
        make(server, vision=False).generate(ask(context=PromptContext(images=images)))
        seeing, blind = server.chat_requests
    assert seeing["messages"][0] == MESSAGES[0]
    parts = seeing["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": MESSAGES[1]["content"]}
    urls = [p["image_url"]["url"] for p in parts[1:]]
    assert [p["type"] for p in parts[1:]] == ["image_url"] * 3
    assert all(u.startswith("data:image/png;base64,") for u in urls)
    decoded = [base64.b64decode(u.split(",", 1)[1]) for u in urls]
    assert decoded[0] == png_bytes(10) and decoded[1] == on_disk.read_bytes()
    assert decoded[2].startswith(b"\x89PNG")
    assert blind["messages"] == MESSAGES
    assert MESSAGES[1]["content"].startswith("Write")  # the caller's messages were not modified


def test_configuration_from_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY.*--base-url"):
        OpenAIBackend("some-model")
    with pytest.raises(BackendError, match="--model"):
        OpenAIBackend(base_url="http://127.0.0.1:9/v1")
    with OpenAITestServer(script=["local"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_MODEL", "env-model")
        (reply,) = OpenAIBackend(max_retries=0).generate(ask())
        assert server.requests[0].headers.get("authorization") == "Bearer not-needed"
        assert server.chat_requests[0]["model"] == "env-model"
    assert reply.text == "local"


def test_max_completion_tokens_and_extra_params_are_sent():
    with OpenAITestServer(script=["ok"]) as server:
        backend = make(server, max_tokens_param="max_completion_tokens", extra_params={"seed": 7, "top_p": 0.9})
        backend.generate(ask(max_tokens=100))
        (body,) = server.chat_requests
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert body["seed"] == 7 and body["top_p"] == 0.9


def test_unreachable_endpoint_gives_error_replies():
    with OpenAITestServer() as server:
        url = server.base_url
    backend = OpenAIBackend("m", base_url=url, timeout=1.0, max_retries=1, backoff_base=0.001, jitter=0.0)
    (reply,) = backend.generate(ask())
    assert reply.text is None and "Connection" in reply.error


def test_test_server_lists_models_and_stops_itself_after_its_lifetime():
    import openai

    with OpenAITestServer(models=["m1", "m2"]) as server:  # the listing, with the default lifetime: no race with it
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5.0)
        assert [m.id for m in client.models.list()] == ["m1", "m2"]
    short = OpenAITestServer(models=["m1"], lifetime=0.3).start()  # asked nothing: it stops by itself
    client = openai.OpenAI(base_url=short.base_url, api_key="k", max_retries=0, timeout=5.0)
    assert short.wait_stopped(timeout=10.0)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()

"""`engine serve` with the official openai client (tiny model, server in this process): completions, chat,
streaming with usage, concurrency, stop strings, /metrics parsed by prometheus_client, and every bad request."""
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from engine.core.prompting import chat_ids
from engine.serving.api_server.vllm_metrics import ServerMetrics
from tests.serving_helpers import InProcessServer, metrics_of, post

PROMPT = "Two bends on the old post road"


@pytest.fixture(scope="module")
def server():
    srv = InProcessServer("tiny-llama")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def greedy(client, prompt=PROMPT, n=12, **extra):
    return client.completions.create(model="tiny-llama", prompt=prompt, max_tokens=n, temperature=0,
                                     extra_body={"ignore_eos": True, **extra})


def test_models_lists_the_served_model(client, server):
    ids = [m.id for m in client.models.list().data]
    assert ids == ["tiny-llama"]
    status, _, body = post(server.url, "/v1/models", None, method="GET")
    assert status == 200 and body["data"][0]["max_model_len"] == server.served.info.config.max_seq_len


def test_completion_usage_counts_match_the_tokenizer(client, server):
    out = greedy(client, n=9)
    n_prompt = len(server.served.info.tokenizer.encode(PROMPT, add_special_tokens=False))
    assert out.usage.prompt_tokens == n_prompt and out.usage.completion_tokens == 9
    assert out.usage.total_tokens == n_prompt + 9 and out.choices[0].finish_reason == "length"
    status, _, tok = post(server.url, "/tokenize", {"model": "tiny-llama", "prompt": PROMPT})
    assert status == 200 and tok["count"] == n_prompt


def test_streaming_gives_one_chunk_per_token_and_the_same_text(client):
    whole = greedy(client, n=10)
    chunks = list(client.completions.create(model="tiny-llama", prompt=PROMPT, max_tokens=10, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    with_text = [c for c in chunks if c.choices]
    assert len(with_text) == 10  # one per token: the client's gaps are the engine's steps
    assert "".join(c.choices[0].text for c in with_text) == whole.choices[0].text
    assert with_text[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 10 and not chunks[-1].choices


def test_token_ids_as_prompt_and_in_the_answer(client, server):
    ids = server.served.info.tokenizer.encode(PROMPT, add_special_tokens=False)
    by_text, by_ids = greedy(client, n=6, return_token_ids=True), greedy(client, prompt=ids, n=6, return_token_ids=True)
    assert by_text.choices[0].text == by_ids.choices[0].text
    assert server.served.info.tokenizer.decode(by_ids.choices[0].token_ids) == by_ids.choices[0].text


def test_chat_applies_the_template_streamed_or_not(client, server):
    messages = [{"role": "user", "content": "Which bend is the bridge?"}]
    whole = client.chat.completions.create(model="tiny-llama", messages=messages, max_tokens=8, temperature=0,
                                           extra_body={"ignore_eos": True})
    assert whole.usage.prompt_tokens == len(chat_ids(server.served.info, messages))
    assert whole.choices[0].message.role == "assistant" and whole.usage.completion_tokens == 8
    parts = list(client.chat.completions.create(model="tiny-llama", messages=messages, max_tokens=8, temperature=0,
                                                stream=True, extra_body={"ignore_eos": True}))
    assert parts[0].choices[0].delta.role == "assistant"
    assert "".join(p.choices[0].delta.content or "" for p in parts) == whole.choices[0].message.content


def test_four_clients_at_once_each_get_their_own_answer(client):
    prompts = [f"{PROMPT} {i}" for i in range(4)]
    alone = [greedy(client, p, n=8).choices[0].text for p in prompts]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda p: greedy(client, p, n=8), prompts))
    assert [r.choices[0].text for r in together] == alone
    assert all(r.usage.completion_tokens == 8 for r in together)


def test_stop_string_cuts_the_text_and_ends_the_request(client):
    full = greedy(client, n=24).choices[0].text
    stop = full[len(full) // 2: len(full) // 2 + 3]
    assert len(stop) == 3
    cut = greedy(client, n=24, stop=[stop])
    assert cut.choices[0].text == full[:full.index(stop)] and cut.choices[0].finish_reason == "stop"
    assert cut.usage.completion_tokens < 24  # the scheduler was told to stop
    streamed = client.completions.create(model="tiny-llama", prompt=PROMPT, max_tokens=24, temperature=0, stream=True,
                                         stop=stop, extra_body={"ignore_eos": True})
    assert "".join(c.choices[0].text for c in streamed if c.choices) == cut.choices[0].text


def test_metrics_have_vllms_names_and_count_requests(client, server):
    before = metrics_of(server.url)
    greedy(client, n=5)
    greedy(client, n=7)
    after = metrics_of(server.url)
    for family in ("time_to_first_token_seconds", "inter_token_latency_seconds", "request_prefill_time_seconds",
                   "request_decode_time_seconds", "request_queue_time_seconds", "e2e_request_latency_seconds"):
        assert after[f"vllm:{family}_count"] - before.get(f"vllm:{family}_count", 0) == (10 if "inter" in family else 2)
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 12
    assert after["vllm:prompt_tokens_total"] > before["vllm:prompt_tokens_total"]
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0
    assert after["vllm:request_success_total"] - before["vllm:request_success_total"] == 2


BAD = [  # (body or raw bytes, status, words the message must contain, param)
    ({"model": "tiny-llama"}, 400, "prompt is required", "prompt"),
    ({"model": "tiny-llama", "prompt": "x", "max_tokens": "ten"}, 400, "integer", "max_tokens"),
    (b"{not json", 400, "not valid JSON", None),
    ([1, 2], 400, "JSON object", None),
    ({"model": "tiny-llama", "prompt": "x", "max_tokens": -5}, 400, "at least 1", "max_tokens"),
    ({"model": "tiny-llama", "prompt": "x", "max_tokens": 10**9}, 400, "at most", "max_tokens"),
    ({"model": "tiny-llama", "prompt": [5] * 300, "max_tokens": 4}, 400, "256", "prompt"),
    ({"model": "tiny-llama", "prompt": "x", "temperature": -1}, 400, "temperature", "temperature"),
    ({"model": "tiny-llama", "prompt": "x", "top_p": 0}, 400, "top_p", "top_p"),
    ({"model": "tiny-llama", "prompt": "x", "top_k": 10**6}, 400, "top_k", "top_k"),
    ({"model": "tiny-llama", "prompt": "x", "seed": "abc"}, 400, "seed", "seed"),
    ({"model": "tiny-llama", "prompt": "x", "ignore_eos": "yes"}, 400, "true or false", "ignore_eos"),
    ({"model": "tiny-llama", "prompt": "x", "stop": [""]}, 400, "stop", "stop"),
    ({"model": "tiny-llama", "prompt": [10**6]}, 400, "vocabulary", "prompt"),
    ({"model": "tiny-llama", "prompt": "x", "n": 2}, 400, "not supported", "n"),
    ({"model": "tiny-llama", "prompt": "x", "stream_options": {"include_usage": True}}, 400, "stream", "stream_options"),
    ({"model": "gpt-9", "prompt": "x"}, 404, "does not exist", "model"),
    ({"prompt": "x"}, 400, "model is required", "model"),
]


@pytest.mark.parametrize("body,status,words,param", BAD)
def test_bad_completion_requests_get_openai_style_4xx(server, body, status, words, param):
    raw = body if isinstance(body, bytes) else None
    got, headers, answer = post(server.url, "/v1/completions", body, raw=raw)
    assert got == status and headers["content-type"] == "application/json"
    error = answer["error"]
    assert words in error["message"] and error["param"] == param and "Traceback" not in error["message"]


@pytest.mark.parametrize("body,words", [
    ({"model": "tiny-llama", "messages": "hi"}, "messages must be"),
    ({"model": "tiny-llama", "messages": [{"role": "user", "content": 5}]}, "content must be a string"),
    ({"model": "tiny-llama"}, "messages is required"),
])
def test_bad_chat_requests_get_4xx(server, body, words):
    status, _, answer = post(server.url, "/v1/chat/completions", body)
    assert status == 400 and words in answer["error"]["message"]


def test_unknown_route_and_wrong_method_answer_json(server):
    assert post(server.url, "/v2/nothing", {})[0] == 404
    status, _, answer = post(server.url, "/v1/completions", None, method="GET")
    assert status == 405 and answer["error"]["type"] == "invalid_request_error"


def test_full_queue_answers_429_with_retry_after():
    held = InProcessServer("tiny-llama", max_queue=2, hold=True)  # nothing runs: two requests fill the queue
    try:
        import http.client
        conns = []
        for _ in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", int(held.url.rsplit(":", 1)[1]), timeout=30)
            conn.request("POST", "/v1/completions", body=b'{"model": "tiny-llama", "prompt": "x", "stream": true}')
            assert conn.getresponse().status == 200
            conns.append(conn)
        status, headers, answer = post(held.url, "/v1/completions", {"model": "tiny-llama", "prompt": "x"})
        assert status == 429 and int(headers["retry-after"]) >= 1 and "queue is full" in answer["error"]["message"]
        for conn in conns:
            conn.close()
    finally:
        held.close()


def test_metrics_registry_is_per_server():
    a, b = ServerMetrics("a"), ServerMetrics("b")
    a.generation_tokens.inc(3)
    assert b"generation_tokens_total{model_name=\"b\"} 0.0" in b.exposition(0, 0)

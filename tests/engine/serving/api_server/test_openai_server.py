"""`engine serve` with the official openai client (tiny model, server in this process): completions, chat,
streaming with usage, concurrency, stop strings, lists of prompts, the model's names, /metrics parsed by
prometheus_client, /version and /openapi.json, and every bad request."""
import http.client
import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from engine.core.prompting import chat_ids
from engine.serving.api_server.vllm_metrics import ServerMetrics
from tests.serving_helpers import CliServer, InProcessServer, free_port, metrics_of, post

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
    tpot = after["vllm:request_time_per_output_token_seconds_sum"] - before["vllm:request_time_per_output_token_seconds_sum"]
    itl = after["vllm:inter_token_latency_seconds_sum"] - before["vllm:inter_token_latency_seconds_sum"]
    assert after["vllm:request_time_per_output_token_seconds_count"] - \
        before["vllm:request_time_per_output_token_seconds_count"] == 2
    assert tpot > 0 and itl > 0 and tpot <= itl  # each request's mean gap: (its gaps' sum) / 4 and / 6, same clock


def test_metrics_carry_vllms_labels_and_the_families_clients_read(client, server):
    greedy(client, n=3)
    text = post_raw(server.url, "/metrics")
    assert 'vllm:generation_tokens_total{engine="0",model_name="tiny-llama"}' in text
    for reason in ("stop", "length", "abort", "error", "repetition"):  # every series of vLLM's, from the start
        assert f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name="tiny-llama"}}' in text
    for name in ("vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
                 "vllm:request_time_per_output_token_seconds_bucket"):
        assert name + "{" in text, name
    now = metrics_of(server.url)
    assert now["vllm:prefix_cache_queries_total"] == now["vllm:prefix_cache_hits_total"] == 0  # no prefix cache here
    assert now["vllm:kv_cache_usage_perc"] == 0  # nothing running


def test_kv_cache_usage_counts_the_running_requests_tokens(server):
    """While a request streams, the gauge holds its prompt and the tokens so far over the one slot's context."""
    conn = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=60)
    ids, n = [7] * 40, 200
    conn.request("POST", "/v1/completions", body=json.dumps({"prompt": ids, "max_tokens": n, "ignore_eos": True,
                                                            "stream": True}).encode())
    resp = conn.getresponse()
    seen = 0
    while seen < 3:
        seen += resp.readline().startswith(b"data:")
    share = metrics_of(server.url)["vllm:kv_cache_usage_perc"]
    conn.close()
    context = server.served.info.config.max_seq_len
    assert (len(ids) + 3) / context <= share <= (len(ids) + n) / context


def test_model_may_be_left_out_and_answers_carry_the_served_name(server):
    status, _, answer = post(server.url, "/v1/completions", {"prompt": PROMPT, "max_tokens": 3})
    assert status == 200 and answer["model"] == "tiny-llama" and answer["usage"]["completion_tokens"] == 3
    for model in (None, ""):  # vLLM reads both as "the served model"
        assert post(server.url, "/v1/chat/completions", {"model": model, "max_tokens": 2,
                                                           "messages": [{"role": "user", "content": "hi"}]})[0] == 200


def test_a_list_of_prompts_gets_one_choice_each(client, server):
    prompts = [PROMPT, "Another bend", PROMPT + " again"]
    alone = [greedy(client, p, n=6).choices[0].text for p in prompts]
    together = greedy(client, prompts, n=6)
    assert [c.index for c in together.choices] == [0, 1, 2] and [c.text for c in together.choices] == alone
    tok = server.served.info.tokenizer
    assert together.usage.prompt_tokens == sum(len(tok.encode(p, add_special_tokens=False)) for p in prompts)
    assert together.usage.completion_tokens == 18
    ids = [tok.encode(p, add_special_tokens=False) for p in prompts[:2]]
    assert [c.text for c in greedy(client, ids, n=6).choices] == alone[:2]  # lists of token ids too
    chunks = list(client.completions.create(model="tiny-llama", prompt=prompts, max_tokens=6, temperature=0,
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}))
    for i, text in enumerate(alone):
        mine = [c.choices[0] for c in chunks if c.choices and c.choices[0].index == i]
        assert "".join(c.text for c in mine) == text and len(mine) == 6
        assert mine[-1].finish_reason == "length" and all(c.finish_reason is None for c in mine[:-1])
    assert chunks[-1].usage.completion_tokens == 18


def test_version_and_the_openapi_description(server):
    status, _, version = post(server.url, "/version", None, method="GET")
    assert status == 200 and isinstance(version["version"], str) and version["version"]
    status, _, schema = post(server.url, "/openapi.json", None, method="GET")
    assert status == 200 and schema["info"]["version"] == version["version"]
    body = schema["paths"]["/v1/completions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CompletionRequest"}
    limits = schema["components"]["schemas"]["CompletionRequest"]["properties"]["max_tokens"]["anyOf"][0]
    assert limits["maximum"] == server.served.info.config.max_seq_len - 1  # the served model's own context
    assert "swagger" in post_raw(server.url, "/docs").lower()


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
    ({"model": 5, "prompt": "x"}, 400, "model must be a string", "model"),
    ({"prompt": ["a", ""]}, 400, "prompt[1] is empty", "prompt"),
    ({"prompt": ["a", 5]}, 400, "list of such prompts", "prompt"),
    ({"prompt": ["a"] * 65}, 400, "at most 64", "prompt"),
    ({"prompt": "x", "n": True}, 400, "not supported", "n"),
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
    status, headers, answer = post(server.url, "/v1/completions", None, method="GET")
    assert status == 405 and answer["error"]["type"] == "invalid_request_error" and headers["allow"] == "POST"


def test_a_model_answers_to_each_of_its_names():
    """As vLLM's --served-model-name A B: /v1/models lists both, either is accepted, answers and metrics say A."""
    srv = InProcessServer("tiny-llama", names=["org/tiny-llama", "tiny-llama"])
    try:
        status, _, listed = post(srv.url, "/v1/models", None, method="GET")
        assert [m["id"] for m in listed["data"]] == ["org/tiny-llama", "tiny-llama"]
        for name in ("org/tiny-llama", "tiny-llama"):
            status, _, answer = post(srv.url, "/v1/completions", {"model": name, "prompt": PROMPT, "max_tokens": 2})
            assert status == 200 and answer["model"] == "org/tiny-llama"
        status, _, answer = post(srv.url, "/v1/completions", {"model": "tiny", "prompt": PROMPT})
        assert status == 404 and "'org/tiny-llama', 'tiny-llama'" in answer["error"]["message"]
        assert 'model_name="org/tiny-llama"' in post_raw(srv.url, "/metrics")
    finally:
        srv.close()


def test_the_cli_takes_several_served_names_and_says_so_once_warm():
    srv = CliServer("--model", "tiny-llama", "--device", "cpu", "--served-model-name", "room/tiny", "tiny",
                    port=free_port())
    try:
        assert "serving 'room/tiny' (also as 'tiny')" in srv.lines[-1]
        status, _, listed = post(srv.url, "/v1/models", None, method="GET")
        assert [m["id"] for m in listed["data"]] == ["room/tiny", "tiny"]
        assert post(srv.url, "/v1/completions", {"model": "tiny", "prompt": PROMPT, "max_tokens": 2})[2]["model"] == \
            "room/tiny"
    finally:
        srv.close()


def test_served_names_default_to_the_hub_id_then_the_name_given():
    from engine.loading.model_store import BUNDLED_HF_ID
    from engine.serving.api_server.openai_server import served_names

    assert served_names("smollm2-135m") == [BUNDLED_HF_ID, "smollm2-135m"]
    assert served_names("gpt2") == ["openai-community/gpt2", "gpt2"]
    assert served_names("tiny-llama") == ["tiny-llama"]  # random weights: no Hub id
    assert served_names("smollm2-135m", ["mine", "mine", "also"]) == ["mine", "also"]


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
    assert b'generation_tokens_total{engine="0",model_name="b"} 0.0' in b.exposition(0, 0)


def post_raw(url: str, path: str) -> str:
    """The body of GET `path` as text."""
    conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)
    conn.request("GET", path)
    text = conn.getresponse().read().decode()
    conn.close()
    return text

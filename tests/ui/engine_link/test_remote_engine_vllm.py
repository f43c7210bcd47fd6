"""The room's serving engine when it is a real vLLM (CPU build, our SmolLM2 weights): a Run measured there, and the
local engine's untimed replay of the same prompt for the insides (slow: vLLM takes minutes to start on 2 cores)."""

import engine
from engine.core.sampling_params import SamplingParams
from engine.serving.scheduling.work import Done, ModelSpec, Request, drain
from ui.engine_link import remote_engine, server_measurement

LOCAL = ModelSpec("smollm2-135m", "cpu", "float32")


def test_a_run_on_vllm_is_measured_and_replayed_locally(vllm_url, monkeypatch, smollm):
    monkeypatch.setenv(server_measurement.ENV, "127.0.0.1")
    ids = smollm.tokenizer.encode("The old post road had two bends: a wide valley and a narrow bridge.")
    work = Request(model=LOCAL, prompt_ids=ids, max_new_tokens=8, params=SamplingParams(), prompt_text="")
    remote_engine.RemoteEngine(vllm_url).submit(work)
    final = list(drain(work, timeout=300))[-1]
    assert isinstance(final, Done), final
    trace = final.result
    assert trace.source == "server" and trace.settings["same_model"]  # 'smollm2-135m-instruct' is our smollm2-135m
    assert trace.n_prompt == len(ids) and trace.prompt_ids == ids  # vLLM counted exactly our ids
    assert 1 <= trace.n_output <= 8 and -1 not in trace.output_ids  # return_token_ids: the server's own tokens
    assert trace.settings["server_metrics"]["queue"]["count"] == 1  # queue time from vLLM's own /metrics
    local = engine.generate(smollm, ids, max_new_tokens=trace.n_output, capture_attention=True)
    both = remote_engine.with_local_insides(trace, local)
    assert both.prefill_seconds == trace.prefill_seconds and both.attention is not None
    assert both.settings["replayed_locally"]["tokens_agree"] >= 1  # same model, greedy: at least the first token agrees

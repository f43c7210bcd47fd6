"""The server's /metrics: Prometheus text with vLLM's metric names, so vLLM's dashboards and clients read us.

Same names, labels (`model_name`, `engine`), units and bucket edges as vLLM 0.32 (vllm/v1/metrics/loggers.py and
vllm/v1/metrics/buckets.py), so a Grafana board, `vllm bench serve`, guidellm or aiperf made for vLLM works
unchanged. Where each time is taken, as in vLLM:
  TTFT, ITL, end-to-end   at the HTTP front end: from the request's arrival to each token's
                          arrival there (they include queueing and the hop from the scheduler);
  time per output token   per request, (last token - first token) / (output tokens - 1), the same clock
                          as ITL; 0 for a one-token answer, as vLLM records it;
  queue, prefill, decode  inside the scheduler (Started, FirstToken, the decode steps' seconds).
Gauges (running, waiting, KV-cache usage) are set at every scrape. One registry per server, so several servers in
one process (tests) never share counts.

KV-cache usage and the prefix-cache counters mean what docs/serving.md says (this engine grows each request's cache
as it needs it and keeps no prefix cache).
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

ENGINE_INDEX = "0"  # vLLM labels each engine core; this server has one
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")  # vLLM's FinishReason: each series from the start
# vLLM's bucket edges (seconds)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                   960.0, 1920.0, 7680.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """Every vLLM-named metric this server keeps, labelled with the served model's (first) name and engine 0.
    `kv_capacity`: the tokens the scheduler can hold at once (sequences at a time x context), None if not known."""

    def __init__(self, model_name: str, kv_capacity: int | None = None):
        self.registry = CollectorRegistry()
        self.model_name, self.kv_capacity = model_name, kv_capacity
        self.kv_tokens = 0  # tokens the running requests hold now (their flights add and take back, on the event loop)
        r, labels, values = self.registry, ["model_name", "engine"], (model_name, ENGINE_INDEX)

        def hist(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(*values)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r).labels(*values)

        def counter(name: str, doc: str) -> Counter:  # prometheus_client adds the _total vLLM's names end with
            return Counter(name, doc, labels, registry=r).labels(*values)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.tpot = hist("vllm:request_time_per_output_token_seconds",
                         "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                            REQUEST_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                           REQUEST_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                          REQUEST_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_BUCKETS)
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.prefix_queries = counter("vllm:prefix_cache_queries",
                                      "Prefix cache queries, in terms of number of queried tokens.")
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self._success = Counter("vllm:request_success", "Count of successfully processed requests.",
                                labels + ["finished_reason"], registry=r)
        for reason in FINISHED_REASONS:
            self._success.labels(*values, reason)

    def finished(self, reason: str) -> None:
        """A request ended: reason "stop", "length", "abort" (client gone, server stopping) or "error" (the engine
        failed on it: a 500), as in vLLM."""
        self._success.labels(self.model_name, ENGINE_INDEX, reason).inc()

    def kv_share(self) -> float:
        """The running requests' tokens over the scheduler's capacity, in [0, 1] (0 when the capacity is unknown)."""
        if not self.kv_capacity:
            return 0.0
        return min(1.0, max(0, self.kv_tokens) / self.kv_capacity)

    def exposition(self, running: int, waiting: int) -> bytes:
        """The text a scrape of /metrics returns, with the gauges set to the scheduler's numbers now."""
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv_usage.set(self.kv_share())
        return generate_latest(self.registry)

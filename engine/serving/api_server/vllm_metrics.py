"""The server's /metrics: Prometheus text with vLLM's metric names, so vLLM's dashboards and clients read us.

Same names, units and bucket edges as vLLM (vllm/v1/metrics/loggers.py), so a Grafana board or
`vllm bench serve` made for vLLM works unchanged. Where each time is taken, as in vLLM:
  TTFT, ITL, end-to-end   at the HTTP front end: from the request's arrival to each token's
                          arrival there (they include queueing and the hop from the scheduler);
  queue, prefill, decode  inside the scheduler (Started, FirstToken, the decode steps' seconds).
Gauges (running, waiting) are read from the scheduler at every scrape. One registry per server, so
several servers in one process (tests) never share counts.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# vLLM's bucket edges (seconds)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
                   960.0, 1920.0, 7680.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServerMetrics:
    """Every vLLM-named metric this server keeps, labelled with the served model's name."""

    def __init__(self, model_name: str):
        self.registry = CollectorRegistry()
        self.model_name = model_name
        r, labels = self.registry, ["model_name"]

        def hist(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(model_name)

        self.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS)
        self.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS)
        self.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                            REQUEST_BUCKETS)
        self.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                           REQUEST_BUCKETS)
        self.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                          REQUEST_BUCKETS)
        self.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", REQUEST_BUCKETS)
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                             registry=r).labels(model_name)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels,
                             registry=r).labels(model_name)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                                     registry=r).labels(model_name)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                                         registry=r).labels(model_name)
        self._success = Counter("vllm:request_success", "Count of successfully processed requests.",
                                labels + ["finished_reason"], registry=r)

    def finished(self, reason: str) -> None:
        """A request ended: reason "stop", "length" or "abort" (client gone or engine failure), as in vLLM."""
        self._success.labels(self.model_name, reason).inc()

    def exposition(self, running: int, waiting: int) -> bytes:
        """The text a scrape of /metrics returns, with the gauges set to the scheduler's numbers now."""
        self.running.set(running)
        self.waiting.set(waiting)
        return generate_latest(self.registry)

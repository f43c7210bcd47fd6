"""A client for any OpenAI-compatible server, timing each streamed token from the outside (vLLM's definitions).

Plain `http.client` from the standard library: one connection per request, no redirects followed
(a measured URL can never send us elsewhere), every network problem turned into one EngineError
sentence. The timings are those of vLLM's benchmark client (vllm bench serve):
  TTFT  request sent -> first chunk with a choice;   ITL  gap between consecutive such chunks;
  E2E   request sent -> last such chunk;              TPOT (E2E - TTFT) / (output tokens - 1).
A chunk normally carries one token; `usage` (stream_options.include_usage) gives the true count.
"""
from __future__ import annotations

import http.client
import json
import socket
import time
from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from engine.errors import EngineError

USER_AGENT = "two-bends-measure"


@dataclass(frozen=True)
class Target:
    """A server's base address: scheme, host, port, and the path before /v1 (usually empty)."""
    scheme: str
    host: str
    port: int
    prefix: str = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.prefix}"


def parse_url(url: str) -> Target:
    """http(s)://host[:port][/prefix][/v1] -> Target; EngineError for anything else."""
    if not isinstance(url, str) or not url.strip():
        raise EngineError("give the server's URL, e.g. http://127.0.0.1:8000")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise EngineError(f"bad URL '{url}': {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"bad URL '{url}': use http://HOST:PORT or https://HOST:PORT")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise EngineError(f"bad URL '{url}': no user name, password, query or fragment, only scheme, host, port and path")
    prefix = parts.path.rstrip("/")
    prefix = prefix[:-3] if prefix.endswith("/v1") else prefix
    return Target(parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80), prefix)


@dataclass
class Streamed:
    """One streamed completion as the client saw it (perf_counter seconds)."""
    sent_at: float
    chunk_times: list[float] = field(default_factory=list)  # each chunk carrying a choice
    pieces: list[str] = field(default_factory=list)  # text of each such chunk
    token_ids: list[int] = field(default_factory=list)  # when the server reports them (vLLM's return_token_ids)
    usage: dict | None = None
    finish_reason: str | None = None

    @property
    def ttft(self) -> float:
        return self.chunk_times[0] - self.sent_at

    @property
    def itl(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def e2e(self) -> float:
        return self.chunk_times[-1] - self.sent_at

    @property
    def output_tokens(self) -> int:
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"]
        return len(self.token_ids) or len(self.chunk_times)


class Client:
    def __init__(self, url: str, timeout: float = 120.0, api_key: str = ""):
        self.target = parse_url(url)
        self.timeout = timeout
        self.api_key = api_key  # sent as 'Authorization: Bearer …' when set (vLLM's --api-key, OpenAI's own)

    def _connect(self) -> http.client.HTTPConnection:
        t = self.target
        cls = http.client.HTTPSConnection if t.scheme == "https" else http.client.HTTPConnection
        return cls(t.host, t.port, timeout=self.timeout)

    def _fail(self, exc: Exception, path: str) -> EngineError:
        where = self.target.url
        if isinstance(exc, ConnectionRefusedError):
            return EngineError(f"cannot connect to {where}: connection refused (is the server running on that port?)")
        if isinstance(exc, socket.gaierror):
            return EngineError(f"cannot find the host '{self.target.host}' ({exc.strerror or exc})")
        if isinstance(exc, (TimeoutError, socket.timeout)):
            return EngineError(f"{where}{path} did not answer within {self.timeout:g} s")
        if isinstance(exc, http.client.HTTPException):
            return EngineError(f"{where}{path} did not answer in HTTP ({type(exc).__name__}); is this an HTTP server?")
        return EngineError(f"cannot reach {where}{path}: {getattr(exc, 'strerror', None) or exc}")

    def _send(self, method: str, path: str, body: dict | None):
        conn = self._connect()
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json, text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        try:
            conn.request(method, self.target.prefix + path, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self._fail(exc, path) from None

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """(status, body) of a plain request; EngineError only for network problems."""
        conn, resp = self._send(method, path, body)
        try:
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._fail(exc, path) from None
        finally:
            conn.close()

    def error_of(self, path: str, status: int, raw: bytes) -> EngineError:
        """An HTTP error answer in one line: the server's own message when it sent OpenAI-style JSON."""
        try:
            err = json.loads(raw)
            message = err["error"]["message"] if isinstance(err.get("error"), dict) else err.get("error") or err.get("detail")
        except (ValueError, AttributeError, KeyError, TypeError, RecursionError):
            message = None
        if not isinstance(message, str):
            message = raw.decode(errors="replace")
        lines = message.strip().splitlines()
        text = lines[0][:200].encode("utf-8", "backslashreplace").decode("utf-8") if lines else ""  # one printable line
        return EngineError(f"{self.target.url}{path} answered HTTP {status}{': ' + text if text else ''}")

    def json(self, method: str, path: str, body: dict | None = None):
        status, raw = self.call(method, path, body)
        if status >= 400:
            raise self.error_of(path, status, raw)
        try:
            return json.loads(raw)
        except ValueError:
            raise EngineError(f"{self.target.url}{path} did not answer with JSON; is this an OpenAI-compatible server?") from None

    def stream_completion(self, body: dict, path: str = "/v1/completions") -> Streamed:
        """POST a completion (or, with path="/v1/chat/completions", a chat) with stream=true and time every chunk
        as it arrives."""
        out = Streamed(sent_at=time.perf_counter())
        conn, resp = self._send("POST", path, body)
        try:
            if resp.status >= 400:
                raise self.error_of(path, resp.status, resp.read())
            for raw in resp:  # server-sent events, one "data: ..." line per event
                now = time.perf_counter()
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                try:
                    event = json.loads(data)
                except (ValueError, RecursionError):
                    raise EngineError(f"{self.target.url}{path} streamed something that is not JSON server-sent events") from None
                if isinstance(event, dict) and event.get("error"):
                    raise self.error_of(path, 200, data)
                try:
                    take_event(event, now, out)
                except ValueError as exc:
                    raise EngineError(f"{self.target.url}{path} streamed an event that is not OpenAI's: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise self._fail(exc, path) from None
        finally:
            conn.close()
        if not out.chunk_times:
            raise EngineError(f"{self.target.url}{path} streamed no tokens")
        return out


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def take_event(event, now: float, out: Streamed) -> None:
    """One streamed completion event (parsed JSON) into `out`, timed at `now`; ValueError naming what is not the
    OpenAI shape (another server's bug must not turn into a wrong number, or a crash, further on)."""
    if not isinstance(event, dict):
        return  # not an event of ours to read (a keep-alive, another protocol's line): skipped
    usage = event.get("usage")
    if usage:
        if not isinstance(usage, dict):
            raise ValueError(f"'usage' is a {type(usage).__name__}, not an object")
        wrong = next((k for k in ("prompt_tokens", "completion_tokens") if k in usage and not _count(usage[k])), None)
        if wrong:
            raise ValueError(f"'usage.{wrong}' is {str(usage[wrong])[:40]!r}, not a count of tokens")
        out.usage = usage
    choices = event.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise ValueError("'choices' is not a list of objects")
    for choice in choices:
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}  # a chat's chunk
        text, ids, finish = choice.get("text") or delta.get("content") or "", choice.get("token_ids") or [], \
            choice.get("finish_reason")
        if not isinstance(text, str):
            raise ValueError(f"a choice's 'text' is a {type(text).__name__}, not a string")
        if not isinstance(ids, list) or not all(_count(t) for t in ids):
            raise ValueError("a choice's 'token_ids' is not a list of token ids")
        if finish is not None and not isinstance(finish, str):
            raise ValueError(f"a choice's 'finish_reason' is a {type(finish).__name__}, not a string")
        out.chunk_times.append(now)
        out.pieces.append(text)
        out.token_ids += ids
        out.finish_reason = finish or out.finish_reason


def parse_metrics(text: str, model: str | None = None) -> dict[str, float]:
    """Prometheus text -> {sample name: value} summed over label sets, for vLLM's names (and one model)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created") or sample.name.endswith("_bucket"):
                continue
            if model and sample.labels.get("model_name", model) != model:
                continue
            sums[sample.name] += sample.value
    return dict(sums)


def scrape(client: Client, model: str | None) -> dict[str, float] | None:
    """The server's /metrics summed per name, or None when it has none (or not in Prometheus text)."""
    try:
        status, raw = client.call("GET", "/metrics")
        if status != 200:
            return None
        return parse_metrics(raw.decode(errors="replace"), model)
    except (EngineError, ValueError):
        return None

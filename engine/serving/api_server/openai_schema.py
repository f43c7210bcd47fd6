"""The OpenAI API's request and response shapes, checked by hand so every mistake gets a clear 4xx.

A request body is plain JSON; `parse_request` turns it into an `Ask` or raises `ApiError` with the
status, a one-sentence message naming the field, and the field (`param`), exactly as OpenAI's
errors look: {"error": {"message", "type", "param", "code"}}. Field names and defaults follow
OpenAI's API reference and vLLM's extensions (`top_k`, `ignore_eos`, `return_token_ids`); as in vLLM,
`model` may be left out (the served model answers) and a completion's `prompt` may be a list of
prompts, each answered as its own choice (`index` = its place in the list).
Responses and streamed chunks are built here too, so openai_server.py only moves them.
"""
from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field

from engine.core.prompting import check_text
from engine.core.sampling_params import SamplingParams
from engine.errors import EngineError

MAX_STOP_STRINGS = 8
MAX_PROMPTS = 64  # prompts in one completions request (each is a request of its own in the scheduler's queue)
# fields that would change the answer in ways this server does not do: refused unless left out or at this default
UNSUPPORTED = {"n": 1, "best_of": 1, "echo": False, "logprobs": False, "top_logprobs": 0, "suffix": "", "presence_penalty": 0,
               "frequency_penalty": 0, "logit_bias": {}, "tools": [], "response_format": {"type": "text"}}


class ApiError(Exception):
    """An error answered as OpenAI-style JSON; `headers` e.g. Retry-After for 429."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict | None = None):
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # it may quote a client's lone surrogate
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.headers = status, message, param, code, headers or {}

    def body(self) -> dict:
        kind = {404: "not_found_error", 429: "rate_limit_error"}.get(
            self.status, "invalid_request_error" if self.status < 500 else "server_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


@dataclass
class Ask:
    """One request to generate, checked: what to send to the scheduler and how to answer."""
    kind: str  # "completion" (/v1/completions) or "chat" (/v1/chat/completions)
    model: str | None  # None: the served model (vLLM's default)
    prompts: list[str | list[int]] | None = None  # completions: each text or token ids, one choice each
    messages: list[dict] | None = None  # chat: [{"role", "content"}] with text content
    max_tokens: int | None = None  # None: completions 16 (OpenAI's default), chat: the rest of the context
    params: SamplingParams = field(default_factory=SamplingParams)
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the token counts
    return_token_ids: bool = False  # vLLM's extension: each choice also carries its token ids


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param)


def _int(body: dict, name: str, default, low: int | None = None):
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{name} must be an integer (got {value!r})", name)
    if low is not None and value < low:
        raise _bad(f"{name} must be at least {low} (got {value})", name)
    return value


def _number(body: dict, name: str, default: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(f"{name} must be a number (got {value!r})", name)
    return float(value)


def _bool(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _bad(f"{name} must be true or false (got {value!r})", name)
    return value


def _unicode(text: str, where: str, param: str) -> str:
    """`text` if it is real Unicode (engine.core.prompting.check_text); a 400 naming the field otherwise."""
    try:
        return check_text(text, where)
    except EngineError as exc:
        raise _bad(str(exc), param) from None


def _token_ids(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(t, int) and not isinstance(t, bool) for t in value)


def _one_prompt(value, where: str) -> str | list[int]:
    if isinstance(value, str):
        if not value:
            raise _bad(f"{where} is empty: give some text or token ids", "prompt")
        return _unicode(value, where, "prompt")
    if _token_ids(value):
        return list(value)
    raise _bad(f"{where} must be a non-empty string or a non-empty list of token ids (integers)", "prompt")


def prompts_field(value) -> list[str | list[int]]:
    """A completion's prompts, as OpenAI's API takes them: one text, one list of token ids, or a list of either."""
    if isinstance(value, str) or _token_ids(value):
        return [_one_prompt(value, "prompt")]
    if isinstance(value, list) and value and all(isinstance(p, (str, list)) for p in value):
        if len(value) > MAX_PROMPTS:
            raise _bad(f"prompt holds {len(value)} prompts; this server takes at most {MAX_PROMPTS} in one request",
                       "prompt")
        return [_one_prompt(p, f"prompt[{i}]") for i, p in enumerate(value)]
    raise _bad("prompt must be a non-empty string, a list of token ids (integers), or a list of such prompts", "prompt")


def prompt_field(value) -> str | list[int]:
    """Exactly one prompt (/tokenize): the forms of `prompts_field` holding one."""
    prompts = prompts_field(value)
    if len(prompts) > 1:
        raise _bad(f"this route takes one prompt (got {len(prompts)})", "prompt")
    return prompts[0]


def messages_field(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise _bad("messages must be a non-empty list of {\"role\": ..., \"content\": ...} objects", "messages")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a string \"role\"", "messages")
        content = m.get("content")
        if isinstance(content, list):  # the parts form: [{"type": "text", "text": ...}]
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
                raise _bad(f"messages[{i}].content: only text parts are supported", "messages")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise _bad(f"messages[{i}].content must be a string (got {content!r})", "messages")
        out.append({"role": _unicode(m["role"], f"messages[{i}].role", "messages"),
                    "content": _unicode(content, f"messages[{i}].content", "messages")})
    return out


def _stop(value) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop must be a non-empty string or a list of non-empty strings", "stop")
    if len(stops) > MAX_STOP_STRINGS:
        raise _bad(f"stop takes at most {MAX_STOP_STRINGS} strings (got {len(stops)})", "stop")
    return [_unicode(s, "stop", "stop") for s in stops]


def model_field(value) -> str | None:
    """The model a request names; None (left out, null or "") for the served one, as vLLM reads it."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _bad(f"model must be a string naming a model from GET /v1/models (got {value!r})", "model")
    return _unicode(value, "model", "model")


def parse_request(body, kind: str) -> Ask:
    """Check a JSON body for /v1/completions ("completion") or /v1/chat/completions ("chat")."""
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    model = model_field(body.get("model"))
    for name, default in UNSUPPORTED.items():
        value = body.get(name)
        if value is not None and (type(value) is not type(default) or value != default):  # true is not n=1
            raise _bad(f"{name}={value!r} is not supported by this server", name)
    ask = Ask(kind=kind, model=model)
    if kind == "chat":
        if "messages" not in body:
            raise _bad("messages is required for chat completions", "messages")
        ask.messages = messages_field(body["messages"])
        ask.max_tokens = _int(body, "max_completion_tokens", None, low=1)  # OpenAI's newer name wins
    else:
        if "prompt" not in body:
            raise _bad("prompt is required: a string or a list of token ids", "prompt")
        ask.prompts = prompts_field(body["prompt"])
    max_tokens = _int(body, "max_tokens", None, low=1)
    ask.max_tokens = ask.max_tokens or max_tokens or (16 if kind == "completion" else None)
    top_k = _int(body, "top_k", None)
    if top_k is not None and top_k < 0:  # vLLM's spelling of "off" is -1
        top_k = 0
    seed = _int(body, "seed", None)
    ask.params = SamplingParams(temperature=_number(body, "temperature", 1.0), top_p=_number(body, "top_p", 1.0),
                                top_k=top_k or 0, seed=seed, ignore_eos=_bool(body, "ignore_eos"))
    ask.stop = _stop(body.get("stop"))
    ask.stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options is not None:
        if not ask.stream:
            raise _bad("stream_options is only allowed with \"stream\": true", "stream_options")
        if not isinstance(options, dict):
            raise _bad("stream_options must be an object such as {\"include_usage\": true}", "stream_options")
        ask.include_usage = _bool(options, "include_usage")
    ask.return_token_ids = _bool(body, "return_token_ids")
    return ask


# --- answers ------------------------------------------------------------------------------------------------
def new_id(kind: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24]


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _choice(kind: str, text: str, finish: str | None, ids: list[int] | None, first: bool, stream: bool,
            index: int = 0) -> dict:
    if kind == "chat":
        key = "delta" if stream else "message"
        message = {"role": "assistant", "content": text} if first or not stream else {"content": text}
        choice = {"index": index, key: message if (text or first or not stream) else {}, "logprobs": None,
                  "finish_reason": finish}
    else:
        choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    return choice


@dataclass
class Answer:
    """One choice of a whole answer: its text, why it ended, its prompt's length and its token ids."""
    text: str
    finish: str
    n_prompt: int
    ids: list[int]


def response(kind: str, rid: str, model: str, answers: list[Answer], with_ids: bool) -> dict:
    """A whole (non-streamed) answer: one choice per prompt, the usage summed over them (as vLLM counts it)."""
    choices = [_choice(kind, a.text, a.finish, a.ids if with_ids else None, True, False, i) for i, a in enumerate(answers)]
    return {"id": rid, "object": "chat.completion" if kind == "chat" else "text_completion", "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": usage(sum(a.n_prompt for a in answers), sum(len(a.ids) for a in answers))}


def chunk(kind: str, rid: str, model: str, text: str, finish: str | None, ids: list[int] | None = None,
          first: bool = False, index: int = 0) -> dict:
    """One streamed piece of choice `index`: normally one token's text (finish_reason set on the last token's chunk)."""
    return {"id": rid, "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
            "created": int(time.time()), "model": model,
            "choices": [_choice(kind, text, finish, ids, first, True, index)]}


def usage_chunk(kind: str, rid: str, model: str, n_prompt: int, n_output: int) -> dict:
    """The last chunk with stream_options.include_usage: no choices, only the counts."""
    return {"id": rid, "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
            "created": int(time.time()), "model": model, "choices": [], "usage": usage(n_prompt, n_output)}

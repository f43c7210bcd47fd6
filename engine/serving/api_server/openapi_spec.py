"""What /openapi.json says about this server: every route's request body and answers, as JSON Schema.

The routes read their JSON by hand (openai_schema.py), so each mistake gets OpenAI's error shape and a sentence
naming the field; FastAPI therefore sees no body models, and the schema is written here instead, from the same
rules: the fields openai_schema.py reads, with the served model's own limits (vocabulary, context, the operator's
cap on new tokens) where a field has one. A request the schema refuses gets a 4xx; one it allows may still get a
4xx the schema cannot express (a prompt plus max_tokens beyond the context, a chat template refusing a role
order), never a 5xx. tests/engine/serving/api_server/test_openapi_schema.py holds the server to this with
schemathesis: generated requests, valid and not, checked against the answers' schemas and status codes.
"""
from __future__ import annotations

from engine.core.sampling_params import MAX_SEED, MAX_TEMPERATURE
from engine.serving.api_server.openai_schema import MAX_PROMPTS, MAX_STOP_STRINGS

JSON, STREAM, TEXT = "application/json", "text/event-stream", "text/plain"


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict) -> dict:
    return {"anyOf": [schema, {"type": "null"}]}


def components(vocab: int, context: int, max_new_tokens: int) -> dict:
    """The named schemas, for a model with `vocab` token ids and `context` positions."""
    ids = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": vocab - 1}, "minItems": 1}
    text = {"type": "string", "minLength": 1}
    max_tokens = _nullable({"type": "integer", "minimum": 1, "maximum": min(max_new_tokens, context - 1)})
    sampling = {
        "max_tokens": max_tokens,
        "temperature": _nullable({"type": "number", "minimum": 0, "maximum": MAX_TEMPERATURE,
                                  "description": "0 (or under 1e-5) samples greedily; default 1"}),
        "top_p": _nullable({"type": "number", "exclusiveMinimum": 0, "maximum": 1}),
        "top_k": _nullable({"type": "integer", "maximum": vocab, "description": "0 or negative: off (vLLM's -1)"}),
        "seed": _nullable({"type": "integer", "minimum": 0, "maximum": MAX_SEED}),
        "stop": _nullable({"anyOf": [text, {"type": "array", "items": text, "maxItems": MAX_STOP_STRINGS}]}),
        "stream": _nullable({"type": "boolean"}),
        "stream_options": _nullable({"type": "object", "properties": {
            "include_usage": _nullable({"type": "boolean"})}, "description": "only with \"stream\": true"}),
        "ignore_eos": _nullable({"type": "boolean", "description": "vLLM's: go on past the end-of-sequence token"}),
        "return_token_ids": _nullable({"type": "boolean", "description": "vLLM's: each choice carries its token ids"}),
        "n": _nullable({"type": "integer", "enum": [1], "description": "one answer per prompt"}),
    }
    model = _nullable({"type": "string", "description": "a name GET /v1/models lists; left out: the served model"})
    part = {"type": "object", "required": ["type", "text"],
            "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}
    message = {"type": "object", "required": ["role", "content"], "properties": {
        "role": {"type": "string"}, "content": {"anyOf": [{"type": "string"}, {"type": "array", "items": part}]}}}
    usage = {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
             "properties": {k: {"type": "integer", "minimum": 0}
                            for k in ("prompt_tokens", "completion_tokens", "total_tokens")}}
    finish = _nullable({"type": "string", "enum": ["stop", "length"]})
    token_ids = {"type": "array", "items": {"type": "integer", "minimum": 0}}
    choice = {"type": "object", "required": ["index", "text", "finish_reason"], "properties": {
        "index": {"type": "integer", "minimum": 0}, "text": {"type": "string"}, "logprobs": {"type": "null"},
        "finish_reason": finish, "token_ids": token_ids}}
    chat_choice = {"type": "object", "required": ["index", "message", "finish_reason"], "properties": {
        "index": {"type": "integer", "minimum": 0}, "logprobs": {"type": "null"}, "finish_reason": finish,
        "message": {"type": "object", "required": ["role", "content"], "properties": {
            "role": {"type": "string", "enum": ["assistant"]}, "content": {"type": "string"}}},
        "token_ids": token_ids}}

    chat_delta = {"type": "object", "required": ["index", "delta", "finish_reason"], "properties": {
        "index": {"type": "integer", "minimum": 0}, "logprobs": {"type": "null"}, "finish_reason": finish,
        "delta": {"type": "object", "properties": {  # the first delta of a choice carries the role
            "role": {"type": "string", "enum": ["assistant"]}, "content": {"type": "string"}}},
        "token_ids": token_ids}}

    def answer(kind: str, item: dict, streamed: bool = False) -> dict:
        """A whole answer, or (`streamed`) one chunk of one: a token's piece of a choice, or the usage at the end."""
        fields = ["id", "object", "created", "model", "choices"] + ([] if streamed else ["usage"])
        return {"type": "object", "required": fields, "properties": {
            "id": {"type": "string"}, "object": {"type": "string", "enum": [kind]}, "created": {"type": "integer"},
            "model": {"type": "string"}, "choices": {"type": "array", "items": item, "minItems": 0 if streamed else 1},
            "usage": _ref("Usage")}}

    return {
        "CompletionRequest": {"type": "object", "required": ["prompt"], "properties": {
            "model": model, **sampling,
            "prompt": {"anyOf": [text, ids, {"type": "array", "minItems": 1, "maxItems": MAX_PROMPTS,
                                             "items": {"anyOf": [text, ids]}}],
                       "description": "text, token ids, or a list of either (one choice each)"}}},
        "ChatCompletionRequest": {"type": "object", "required": ["messages"], "properties": {
            "model": model, **sampling, "max_completion_tokens": max_tokens,
            "messages": {"type": "array", "items": message, "minItems": 1}}},
        "TokenizeRequest": {"anyOf": [
            {"type": "object", "required": ["prompt"], "properties": {"model": model, "prompt": {"anyOf": [
                text, ids, {"type": "array", "minItems": 1, "maxItems": 1, "items": {"anyOf": [text, ids]}}]}}},
            {"type": "object", "required": ["messages"], "properties": {
                "model": model, "messages": {"type": "array", "items": message, "minItems": 1}}}]},
        "Usage": usage,
        "Completion": answer("text_completion", choice),
        "ChatCompletion": answer("chat.completion", chat_choice),
        "CompletionChunk": answer("text_completion", choice, streamed=True),
        "ChatCompletionChunk": answer("chat.completion.chunk", chat_delta, streamed=True),
        "Tokens": {"type": "object", "required": ["count", "max_model_len", "tokens"], "properties": {
            "count": {"type": "integer", "minimum": 0}, "max_model_len": {"type": "integer"}, "tokens": token_ids}},
        "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
            "object": {"type": "string", "enum": ["list"]}, "data": {"type": "array", "items": {
                "type": "object", "required": ["id", "object", "created", "owned_by"], "properties": {
                    "id": {"type": "string"}, "object": {"type": "string", "enum": ["model"]},
                    "created": {"type": "integer"}, "owned_by": {"type": "string"}, "root": {"type": "string"},
                    "max_model_len": {"type": "integer"}}}}}},
        "Version": {"type": "object", "required": ["version"], "properties": {"version": {"type": "string"}}},
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["message", "type", "param", "code"], "properties": {
                "message": {"type": "string"}, "type": {"type": "string"},
                "param": _nullable({"type": "string"}), "code": _nullable({"type": "string"})}}}},
    }


ERRORS = {400: "a request this server cannot answer: the message names the field",
          401: "no API key, or a wrong one (only when the server was started with --api-key)",
          404: "the model named is not served here", 429: "the queue is full: try again after Retry-After seconds",
          500: "the engine failed on this request", 503: "the request was cancelled (the server is shutting down)"}


def _error(status: int) -> dict:
    return {"description": ERRORS[status], "content": {JSON: {"schema": _ref("Error")}}}


def _event(chunk: str) -> dict:
    """One server-sent event of a streamed answer (OpenAPI 3.1: a stream's schema describes each event): a chunk,
    an error that came after the headers, or the closing `[DONE]`."""
    return {"type": "object", "required": ["data"], "properties": {"data": {"anyOf": [
        {"type": "string", "enum": ["[DONE]"]},
        {"type": "string", "contentMediaType": JSON, "contentSchema": {"anyOf": [_ref(chunk), _ref("Error")]}}]}}}


def _body(name: str) -> dict:
    return {"required": True, "content": {JSON: {"schema": _ref(name)}}}


def operations(keyed: bool) -> dict:
    """(path, method) -> the OpenAPI operation fields written here; `keyed`: routes outside OPEN_PATHS answer 401."""
    guarded = [401] if keyed else []

    def generation(answer: str) -> dict:
        return {"200": {"description": "the answer, whole (JSON) or streamed (server-sent events, one chunk per "
                                       "token, then `data: [DONE]`)",
                        "content": {JSON: {"schema": _ref(answer)}, STREAM: {"schema": _event(answer + "Chunk")}}},
                **{str(s): _error(s) for s in (400, *guarded, 404, 429, 500, 503)}}

    return {
        ("/v1/completions", "post"): {"requestBody": _body("CompletionRequest"), "responses": generation("Completion")},
        ("/v1/chat/completions", "post"): {"requestBody": _body("ChatCompletionRequest"),
                                           "responses": generation("ChatCompletion")},
        ("/tokenize", "post"): {"requestBody": _body("TokenizeRequest"), "responses": {
            "200": {"description": "the prompt's token ids", "content": {JSON: {"schema": _ref("Tokens")}}},
            **{str(s): _error(s) for s in (400, *guarded, 404)}}},
        ("/v1/models", "get"): {"responses": {
            "200": {"description": "the served model, once per name it answers to",
                    "content": {JSON: {"schema": _ref("ModelList")}}}, **{str(s): _error(s) for s in guarded}}},
        ("/version", "get"): {"responses": {
            "200": {"description": "this server's version", "content": {JSON: {"schema": _ref("Version")}}}}},
        ("/health", "get"): {"responses": {"200": {"description": "serving"},
                                           "503": {"description": "the scheduler's worker process is gone"}}},
        ("/metrics", "get"): {"responses": {"200": {"description": "Prometheus text with vLLM's metric names",
                                                    "content": {TEXT: {"schema": {"type": "string"}}}}}},
    }


def complete(schema: dict, vocab: int, context: int, max_new_tokens: int, keyed: bool) -> dict:
    """FastAPI's generated schema (paths, methods, summaries) with the bodies and answers written here."""
    for (path, method), fields in operations(keyed).items():
        schema["paths"][path][method].update(fields)
    schema.setdefault("components", {})["schemas"] = components(vocab, context, max_new_tokens)
    if keyed:
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for (path, method) in operations(keyed):
            if 401 in (int(s) for s in schema["paths"][path][method]["responses"]):
                schema["paths"][path][method]["security"] = [{"bearer": []}]
    return schema

"""`python -m engine serve`: our engine behind the OpenAI API, on FastAPI + uvicorn (the stack vLLM uses).

Endpoints: /v1/models, /v1/completions, /v1/chat/completions (streamed as server-sent events or
whole), /tokenize (vLLM's), /health, /metrics (vLLM's metric names, engine/serving/api_server/vllm_metrics.py),
/version, and the API's description: /openapi.json (engine/serving/api_server/openapi_spec.py) and /docs.
Every bad request gets an OpenAI-style JSON error with a 4xx status (engine/serving/api_server/openai_schema.py);
a full queue answers 429 with Retry-After; a client that hangs up mid-stream has its request
cancelled, so the scheduler frees its sequence at the next step. With `--api-key KEY` (vLLM's flag; else the
environment's TWO_BENDS_API_KEY) every route but OPEN_PATHS needs `Authorization: Bearer KEY`
(compared in constant time) and answers 401 without it, as vLLM does.

The model answers to several names, as vLLM's `--served-model-name A B`: by default its Hugging Face id first
(HuggingFaceTB/SmolLM2-135M-Instruct for the bundled model: clients that load a tokenizer by the served name
find it) and the name it was loaded by (smollm2-135m). A request may leave `model` out.

The scheduler runs in a thread of this process by default (docs/decisions/worker-process.md); `--worker process`
keeps the other choice. Before it says it serves, the server warms what a first request would pay for (`prepare`,
`warm_http`; benchmarks/first_request.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import http.client
import json
import os
import socket
import threading
import time
from urllib.parse import urlsplit

import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from engine.core.prompting import chat_ids
from engine.errors import EngineError
from engine.loading.model_store import hub_id
from engine.serving.api_server import openai_schema as api
from engine.serving.api_server import openapi_spec
from engine.serving.api_server.openai_schema import ApiError
from engine.serving.api_server.request_flight import Flight, Served, checked_max_tokens, prompt_ids
from engine.serving.api_server.served_choices import Choices
from engine.serving.api_server.text_stream import TextStream
from engine.serving.api_server.vllm_metrics import CONTENT_TYPE, ServerMetrics
from engine.serving.scheduling import lab_jobs as jobs
from engine.serving.scheduling.work import Job, ModelSpec, result_of
from engine.serving.scheduling.work import Request as EngineRequest
from engine.serving.scheduling.worker import ServiceOptions, make_service

DISCONNECT_POLL_S = 0.5  # a non-streamed request checks this often whether its client is still there
ENV_API_KEY = "TWO_BENDS_API_KEY"  # the key when --api-key is not given (vLLM reads VLLM_API_KEY the same way)
# a load balancer's probe, Prometheus, the version and the API's description need no key (vLLM guards only /v1)
OPEN_PATHS = ("/health", "/metrics", "/version", "/openapi.json", "/docs")
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def version() -> str:
    """This project's version as installed (pyproject.toml's), or a plain 'unknown' when run from a bare checkout."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("two-bends")
    except PackageNotFoundError:
        return "unknown (not installed as a package)"


def served_names(model: str, given: list[str] | str | None = None) -> list[str]:
    """The names a server answers to: `given` (--served-model-name), else the model's Hugging Face id and `model`."""
    if given:
        names = [given] if isinstance(given, str) else list(given)
    else:
        names = [hub_id(model) or model, model]
    return list(dict.fromkeys(n for n in names if n))  # in order, once each


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _json_body(request: Request):
    raw = await request.body()
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc})") from None
    except RecursionError:  # brackets nested deeper than Python's JSON reader goes
        raise ApiError(400, "the request body is nested too deeply to read as JSON") from None


def authorised(header: str | None, api_key: str) -> bool:
    """Is `Authorization: Bearer <key>` this server's key? Constant time: a wrong guess says nothing by its timing."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), api_key.encode())


def create_app(service, served: Served, api_key: str | None = None) -> FastAPI:
    """The HTTP app for one served model; `service` is a LocalService or ProcessService (engine/serving/scheduling/worker.py).
    `api_key`: every route but OPEN_PATHS needs it as a Bearer token (None or "": no key, everything open)."""
    cfg = served.info.config
    app = FastAPI(title="Two Bends engine", version=version(), docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json", swagger_ui_oauth2_redirect_url=None,
                  description=f"An OpenAI-compatible server (vLLM's extensions and metric names) for "
                              f"{', '.join(served.names)}.")
    metrics = ServerMetrics(served.name, kv_capacity=served.slots * cfg.max_seq_len)
    app.state.metrics, app.state.served = metrics, served
    plain_openapi = app.openapi

    def openapi() -> dict:  # FastAPI's paths, with the bodies and answers openapi_spec.py writes
        if app.openapi_schema is None:
            app.openapi_schema = openapi_spec.complete(plain_openapi(), cfg.vocab_size, cfg.max_seq_len,
                                                       served.max_new_tokens_cap, bool(api_key))
        return app.openapi_schema

    app.openapi = openapi

    if api_key:
        @app.middleware("http")
        async def require_key(request: Request, call_next):
            if request.url.path in OPEN_PATHS or authorised(request.headers.get("authorization"), api_key):
                return await call_next(request)
            return _error(ApiError(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>' "
                                   "with the key this server was started with (--api-key)", code="invalid_api_key",
                                   headers={"WWW-Authenticate": "Bearer"}))

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        return _error(exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException):  # unknown route, wrong method (its Allow header kept)
        return _error(ApiError(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}",
                               headers=getattr(exc, "headers", None)))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        return _error(ApiError(400, f"invalid request: {exc.errors()[0].get('msg', exc)}"))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):  # a bug of ours: say so without a traceback
        return _error(ApiError(500, f"internal error ({type(exc).__name__}); the server log has the details"))

    def check_model(name) -> None:
        if name is not None and name not in served.names:
            listed = "', '".join(served.names)
            raise ApiError(404, f"the model '{name}' does not exist; this server serves '{listed}'", "model",
                           "model_not_found")

    @app.get("/health")
    def health():
        alive = getattr(service, "alive", lambda: True)()
        return Response(status_code=200 if alive else 503)

    @app.get("/version")
    def server_version():
        return {"version": app.version}

    @app.get("/v1/models")
    def models():  # one card per name, as vLLM lists its served names
        created = int(time.time())
        return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": "two-bends",
                                            "root": served.info.name, "max_model_len": cfg.max_seq_len}
                                           for name in served.names]}

    @app.get("/metrics")
    def scrape():  # a plain def: FastAPI runs it on a thread, since asking a worker process for its status waits
        try:
            status = service.status()
        except EngineError:
            status = {}
        body = metrics.exposition(status.get("running", 0), status.get("waiting", 0))
        return Response(body, media_type=CONTENT_TYPE)

    @app.post("/tokenize")
    async def tokenize(request: Request):
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        check_model(api.model_field(body.get("model")))
        if "messages" in body:
            ask = api.Ask("chat", None, messages=api.messages_field(body["messages"]))
        else:
            ask = api.Ask("completion", None, prompts=[api.prompt_field(body.get("prompt"))])
        ids = prompt_ids(served, ask)
        return {"count": len(ids), "max_model_len": cfg.max_seq_len, "tokens": ids}

    async def generate(request: Request, kind: str):
        arrival = time.perf_counter()
        ask = api.parse_request(await _json_body(request), kind)
        check_model(ask.model)
        prompts = []  # every prompt checked before any is queued
        for i in range(len(ask.prompts) if kind == "completion" else 1):
            ids = prompt_ids(served, ask, i)
            prompts.append((ids, checked_max_tokens(served, ask, len(ids))))
        flights = [Flight(service, served, metrics, ask, ids, max_tokens, arrival, i)
                   for i, (ids, max_tokens) in enumerate(prompts)]
        choices = Choices(flights)
        choices.submit()
        rid = api.new_id(kind)
        if ask.stream:
            return StreamingResponse(_events(choices, rid), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        return await _whole(request, choices, rid)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await generate(request, "completion")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await generate(request, "chat")

    return app


def _sse(data) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _events(choices: Choices, rid: str):
    """Server-sent events: one chunk per token of each choice (its last one carries finish_reason), the usage if
    asked, [DONE]."""
    ask, name = choices.ask, choices.served.name
    started: set[int] = set()  # choices whose first chunk went out (a chat's first delta carries the role)
    try:
        while (got := await choices.next()) is not None:
            flight, piece = got
            ids = [piece.token_id] if ask.return_token_ids and piece.token_id >= 0 else None
            yield _sse(api.chunk(ask.kind, rid, name, piece.text, piece.finish, ids, flight.index not in started,
                                 flight.index))
            started.add(flight.index)
        if ask.include_usage:
            yield _sse(api.usage_chunk(ask.kind, rid, name, *choices.usage()))
    except ApiError as exc:  # headers are gone already: the error travels as an event
        yield _sse(exc.body())
    finally:
        choices.close()  # a client that hung up lands here too (its task is cancelled): free the sequences
    yield "data: [DONE]\n\n"


async def _whole(request: Request, choices: Choices, rid: str):
    async def collect():
        while await choices.next() is not None:
            pass

    task = asyncio.ensure_future(collect())
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if not task.done() and await request.is_disconnected():
                task.cancel()
                return Response(status_code=499)  # nobody reads it; nginx's code for "client closed request"
        task.result()  # raises the ApiError of a failed request
    finally:
        choices.close()
    ask = choices.ask
    return api.response(ask.kind, rid, choices.served.name, choices.answers(), ask.return_token_ids)


# --- starting a server --------------------------------------------------------------------------------------
def listen(host: str, port: int) -> socket.socket:
    """Bind first, so a busy port is a one-line error before any model is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise EngineError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def prepare(service, spec: ModelSpec, names: str | list[str], max_new_tokens_cap: int, timeout: float = 900.0,
            slots: int = 1) -> Served:
    """Describe the served model (config, tokenizer) and warm it up, so the first client pays no first-call costs:
    the model's first passes, and on this side the chat template (its first use compiles it) and the detokeniser.
    `names`: what clients may call it (the first one is what answers say); `slots`: sequences run at once."""
    info = result_of(service.submit(Job(model=spec, name=jobs.MODEL_DESCRIBE.name, args=(spec,),
                                        label=f"loading {spec.name}")), timeout)
    first = info.config.bos_token_id if info.config.bos_token_id is not None else 0
    result_of(service.submit(EngineRequest(model=spec, prompt_ids=[first] * 8, max_new_tokens=2)), timeout)
    with contextlib.suppress(Exception):  # a model with no chat template answers chat requests with a 400 later
        chat_ids(info, [{"role": "user", "content": "Hello"}])
    TextStream(info.tokenizer).add(first)
    names = [names] if isinstance(names, str) else list(names)
    return Served(names[0], spec, info, max_new_tokens_cap, tuple(names[1:]), slots)


def warm_http(url: str, api_key: str = "") -> None:
    """One request through the server's own HTTP stack before a client's: uvicorn's parser, Starlette's middleware
    stack (built at the first request) and FastAPI's routing cost most the first time."""
    target = urlsplit(url)
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    try:
        conn.request("POST", "/tokenize", body=b'{"messages": [{"role": "user", "content": "Hello"}]}', headers=headers)
        conn.getresponse().read()
    except OSError:
        pass  # a warm-up only: the first client pays the cost instead
    finally:
        conn.close()


def _loopback(host: str) -> str:
    """Where this machine reaches a server bound to `host` (every interface: the loopback of that family)."""
    return {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, f"[{host}]" if ":" in host else host)


def serve(args) -> None:
    """The CLI's `serve`: bind, start the scheduler (WORKER_DEFAULT unless --worker says), load, warm up, serve."""
    api_key = getattr(args, "api_key", None) or os.environ.get(ENV_API_KEY, "")
    sock = listen(args.host, args.port)
    if args.host not in LOCAL_HOSTS and not api_key:
        print(f"warning: listening on {args.host} with no API key: anyone who can reach this machine can use the "
              "model (add --api-key KEY, or bind 127.0.0.1)", flush=True)
    spec = ModelSpec(args.model, args.device, args.dtype, args.kernels)
    options = ServiceOptions(mode=args.mode, max_queue=args.max_queue, max_new_tokens_cap=args.max_new_tokens,
                             max_batch=args.max_batch, threads=args.threads, preload=spec,
                             max_num_batched_tokens=getattr(args, "max_num_batched_tokens", None))
    print(f"loading {args.model} ({args.device}, {args.dtype}) in a scheduler {'process' if args.worker == 'process' else 'thread'}…",
          flush=True)
    service = make_service(options, args.worker)
    try:
        slots = args.max_batch if args.mode in ("batch", "disaggregated") else 1
        served = prepare(service, spec, served_names(args.model, args.served_model_name), args.max_new_tokens,
                         slots=slots)
        also = f" (also as '{', '.join(served.aliases)}')" if served.aliases else ""
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(create_app(service, served, api_key), log_level="warning",
                                               access_log=False))

        def announce() -> None:  # once uvicorn listens and its HTTP stack is warm: clients may come
            while not server.started and not server.should_exit:
                time.sleep(0.01)
            if server.started:
                warm_http(f"http://{_loopback(args.host)}:{port}", api_key)
                print(f"serving '{served.name}'{also} ({served.info.name}, {served.info.device}, {served.info.dtype}) "
                      f"at http://{args.host}:{port}/v1 — scheduling: {args.mode}, queue limit {args.max_queue}; "
                      "Ctrl+C stops" + ("; clients must send the API key" if api_key else ""), flush=True)

        threading.Thread(target=announce, name="two-bends-announce", daemon=True).start()
        server.run(sockets=[sock])
    finally:
        service.close()
        sock.close()

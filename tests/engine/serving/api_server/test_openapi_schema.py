"""schemathesis against our own /openapi.json: requests generated from the schema, valid ones and ones it refuses,
sent to every route of `engine serve` (tiny model, the default queue mode, in this process).

Every answer must be one the schema declares for that route (status code, content type, body against its JSON
Schema), a request the schema refuses must be refused with a 4xx, and nothing may answer 5xx. Bounded and
derandomised: the same cases every run, well under a minute on two cores.
"""
from __future__ import annotations

import pytest

from engine.serving.api_server.openapi_spec import operations
from tests.serving_helpers import InProcessServer

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed: "
                                   "pip install -r requirements-dev.txt")
from hypothesis import HealthCheck, given, settings  # noqa: E402 (after the skip)
from schemathesis import checks  # noqa: E402
from schemathesis.generation.modes import GenerationMode  # noqa: E402

CASES = {"post": 40, "get": 5}  # per route and mode: a body has much to vary, a GET nothing (~370 requests in all)
CHECKS = [checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
          checks.response_schema_conformance, checks.negative_data_rejection]
ROUTES = sorted(operations(keyed=False))


@pytest.fixture(scope="module")
def api_schema():
    server = InProcessServer("tiny-llama")
    try:
        yield schemathesis.openapi.from_url(server.url + "/openapi.json")
    finally:
        server.close()


def test_the_schema_describes_every_route_the_server_has(api_schema):
    assert sorted((path, method.lower()) for path in api_schema for method in api_schema[path]) == ROUTES


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
@pytest.mark.parametrize("path,method", ROUTES)
def test_every_route_answers_as_its_schema_says(api_schema, path, method, mode):
    operation = api_schema[path][method.upper()]
    if mode is GenerationMode.NEGATIVE and method == "get":
        pytest.skip("a GET here takes no parameters: there is nothing to make invalid")

    @settings(max_examples=CASES[method], deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(mode))
    def run(case):
        case.call_and_validate(checks=CHECKS, timeout=60)

    run()

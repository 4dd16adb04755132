"""OPTIONS and 405 name every method of a path; the document's errors are those answered."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.support.controller import ControllerProcess

pytestmark = pytest.mark.slow

DOCUMENT = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())


def test_options_and_405_list_every_method_of_the_path(controller: ControllerProcess) -> None:
    """`/v1/budgets` has GET, PUT and DELETE routes: OPTIONS and a PATCH's 405 say so."""
    options = httpx.options(f"{controller.url}/v1/budgets")
    assert options.status_code == 204
    assert options.headers["allow"] == "DELETE, GET, OPTIONS, PUT"
    patched = httpx.patch(f"{controller.url}/v1/budgets", json={})
    assert patched.status_code == 405
    assert patched.headers["allow"] == "DELETE, GET, OPTIONS, PUT"
    run = httpx.options(f"{controller.url}/v1/runs/team%2Fr1/interventions")
    assert run.headers["allow"] == "OPTIONS, POST"
    assert httpx.options(f"{controller.url}/nowhere").status_code == 404


def test_a_422_has_a_sentence_for_detail_as_the_document_says(
    controller: ControllerProcess,
) -> None:
    """Answered 422s carry `detail` as a string; the document's 422 schema is the same."""
    answered = httpx.put(f"{controller.url}/v1/budgets", json={"max_pending_per_stage": "5"})
    assert answered.status_code == 422
    assert isinstance(answered.json()["detail"], str)
    problem = DOCUMENT["components"]["schemas"]["Problem"]
    assert problem["properties"]["detail"]["type"] == "string"
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            if "422" in operation["responses"]:
                schema = operation["responses"]["422"]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path)


@pytest.mark.parametrize(
    ("method", "path", "statuses"),
    [
        ("post", "/v1/events", {"202", "400", "401", "403", "413", "415", "422", "503"}),
        ("put", "/v1/budgets", {"200", "400", "401", "403", "413", "415", "422", "503"}),
        ("post", "/v1/runs/{run_id}/interventions", {"202", "404", "409", "415", "422"}),
        ("get", "/v1/runs/{run_id}", {"200", "404", "503"}),
    ],
)
def test_the_document_names_each_status_a_route_answers(
    method: str, path: str, statuses: set[str]
) -> None:
    """Error statuses the routes answer are in the document, with a described body."""
    operation = DOCUMENT["paths"][path][method]
    assert statuses <= set(operation["responses"])
    if method in ("post", "put"):
        assert "application/json" in operation["requestBody"]["content"]

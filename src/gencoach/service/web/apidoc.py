"""What the OpenAPI document says of the routes beyond their signatures.

The request bodies (`EVENTS_BODY`, `INTERVENTION_BODY`, `BUDGETS_BODY`) and every error a
route answers (`errors`, `write_errors`), in one shape (`Problem`); `as_served` makes
FastAPI's document say the same.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from gencoach.config import Limits
from gencoach.config.fields import MAX_BUDGET
from gencoach.service.branching.interventions import Intervention

MAX_BATCH = 10_000
"""The most events one `POST /v1/events` may carry."""


# Every error has this shape: `detail` is a sentence (never FastAPI's list of validation
# errors), beside the route's own extra fields (`errors`, `status`). The docstring is the
# schema's description in the OpenAPI document.
class Problem(BaseModel):
    """An error answer: what went wrong in a sentence, and the route's own details."""

    model_config = ConfigDict(extra="allow")

    detail: str


_WHY = {
    400: "The body is not valid JSON or not the JSON value the route takes, or a run "
    "listing's `state`, `cursor` or `limit` is invalid.",
    401: "No bearer token, while the API has one (`api.token_env`).",
    403: "Another bearer token than the API's.",
    404: "No such run (or candidate, or request).",
    409: "The run is over, or the situation's exploration budget is spent.",
    413: "The body is larger than `api.max_body_bytes` (or a batch over 10,000 events).",
    415: "The body is not sent as `application/json`.",
    422: "The JSON names an invalid field, or an object repeats a key; `errors` says which.",
    503: "Redis is unreachable or refuses writes, or the controller is busy (`Retry-After`).",
}
_WRITES = (401, 403, 413, 415, 503)


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route answering these error statuses."""
    return {code: {"model": Problem, "description": _WHY[code]} for code in sorted(codes)}


def write_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses` of a route with a JSON body that needs the token, plus `codes`."""
    return errors(*_WRITES, 400, 422, *codes)


def _body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


# The routes read their bodies themselves (to refuse non-JSON, repeated keys, and every
# invalid event of a batch at once), so FastAPI sees no body parameter: each is given here.
# The batch limit is said in words, not as `maxItems`: a longer batch is a 413 (too
# large), where a schema violation would be a 422.
EVENTS_BODY = _body(
    {"type": "array", "items": {"type": "object"}},
    f"A JSON array of at most {MAX_BATCH:,} generation events (docs/events.md), all "
    "accepted or none; a longer batch is answered 413.",
)
INTERVENTION_BODY = _body(
    {"$ref": "#/components/schemas/Intervention"},
    "A person's correction of one candidate: the diagnosis and the decision instead.",
)
BUDGETS_BODY = _body(
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            name: {"type": "integer", "minimum": 1, "maximum": MAX_BUDGET}
            for name in Limits.model_fields
        },
    },
    "The budgets to change, each a JSON integer from 1 to 1,000,000.",
)


# The intervention's decision is one of two shapes (its model checks this after the
# fields, which pydantic's schema cannot say): words and no calls, or calls and no words.
_HUMAN_DECISION: dict[str, Any] = {
    "description": "The decision expected instead: a non-empty `say` and no tool calls, "
    "or at least one tool call and no words.",
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["say"],
            "properties": {
                "say": {"type": "string", "minLength": 1},
                "tool_calls": {"type": "array", "maxItems": 0},
            },
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["tool_calls"],
            "properties": {
                "say": {"type": "string", "maxLength": 0},
                "tool_calls": {
                    "type": "array",
                    "minItems": 1,
                    "items": {"$ref": "#/components/schemas/ToolCall"},
                },
            },
        },
    ],
}


def _body_schemas() -> dict[str, Any]:
    schema = Intervention.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    defs.pop("AgentDecision", None)  # only the intervention's decision used it
    schema["properties"]["decision"] = _HUMAN_DECISION
    return {**defs, "Intervention": schema}


def as_served(document: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's document, with the bodies' schemas and every 422 in the shape answered.

    FastAPI adds a 422 listing validation errors to each route with parameters; the app
    answers those as every other error (`Problem`), so the document says so.
    """
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(_body_schemas())
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    problem = {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    if "Problem" not in schemas:
        schemas["Problem"] = Problem.model_json_schema()
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            answers = operation.get("responses", {})
            if "422" in answers:
                answers["422"] = {"description": _WHY[422], "content": problem}
    return document

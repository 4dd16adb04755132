"""The `response_format` a chat-completions request carries for each structured-output mode."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel

from gencoach.protocol.llm import answer_schema

StructuredOutput = Literal["json_schema", "json_object", "none"]
# What `auto` tries, in order: the first mode a server does not refuse is remembered.
FALLBACKS: tuple[StructuredOutput, ...] = ("json_schema", "json_object", "none")
# Words by which a 5xx says it refused the request's response_format (llama.cpp's 500).
_FORMAT_WORDS = ("response_format", "json_schema", "json_object")

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")

# Narrowing keywords OpenAI's strict mode does not accept (it answers 400). Dropping them
# only widens what the server enforces: validation of every answer still checks them.
_DROPPED_WHEN_STRICT = frozenset(
    {"minLength", "maxLength", "uniqueItems", "minProperties", "maxProperties"}
)
# Keywords strict mode cannot express and whose removal would change the shape.
_NOT_STRICT = frozenset(
    {"allOf", "oneOf", "not", "if", "then", "else", "patternProperties", "prefixItems"}
)


def schema_name(model: type[BaseModel]) -> str:
    """The contract's name as OpenAI accepts it: letters, digits, _ and -, at most 64."""
    return _NAME_CHARS.sub("_", model.__name__)[:64] or "answer"


def _subschemas(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The schemas nested directly in `node` (not property names or other keyword values)."""
    for keyword in ("properties", "$defs"):
        yield from (item for item in node.get(keyword, {}).values() if isinstance(item, dict))
    for keyword in ("items", "additionalProperties"):
        if isinstance(node.get(keyword), dict):
            yield node[keyword]
    yield from (item for item in node.get("anyOf", ()) if isinstance(item, dict))


def _closed(node: dict[str, Any]) -> bool:
    if _NOT_STRICT & node.keys():
        return False
    if node.get("type") == "object" and not (
        node.get("additionalProperties") is False
        and set(node.get("required", ())) == set(node.get("properties", {}))
    ):
        return False
    return all(_closed(child) for child in _subschemas(node))


def strict_compatible(schema: dict[str, Any]) -> bool:
    """Whether OpenAI's strict mode can take the schema's shape.

    It wants an object at the root, every property required and no extra properties
    anywhere. A contract that is not so (a JSON array, an optional field) is sent whole
    with `strict: false` and relies on validation.
    """
    return schema.get("type") == "object" and _closed(schema)


def _strict_form(node: dict[str, Any]) -> dict[str, Any]:
    form = {key: value for key, value in node.items() if key not in _DROPPED_WHEN_STRICT}
    for keyword in ("properties", "$defs"):
        if keyword in form:
            form[keyword] = {name: _strict_form(item) for name, item in form[keyword].items()}
    if isinstance(form.get("items"), dict):
        form["items"] = _strict_form(form["items"])
    if "anyOf" in form:
        form["anyOf"] = [_strict_form(item) for item in form["anyOf"]]
    return form


def response_format(mode: StructuredOutput, model: type[BaseModel] | None) -> dict[str, Any] | None:
    """The request's `response_format` for a contract, or None to send none.

    `json_schema` is OpenAI's and vLLM's form, strict when the contract allows it (minus
    the keywords strict mode refuses); `json_object` with a `schema` is what llama.cpp's
    server takes (it refuses `json_schema`); `none` enforces nothing.
    """
    if model is None or mode == "none":
        return None
    schema = answer_schema(model)
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    strict = strict_compatible(schema)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema_name(model),
            "schema": _strict_form(schema) if strict else schema,
            "strict": strict,
        },
    }


def refuses_format(status: int, message: str) -> bool:
    """Whether an error answer refuses the structured-output request rather than failing:
    any 4xx but 408 and 429, or a 5xx whose message names the response format."""
    if 400 <= status < 500:
        return status not in (408, 429)
    lowered = message.lower()
    return status >= 500 and any(word in lowered for word in _FORMAT_WORDS)


def schema_prompt(model: type[BaseModel]) -> str:
    """What `none` mode adds to the prompt: the answer's JSON schema, since nothing enforces it."""
    schema = json.dumps(answer_schema(model), separators=(",", ":"))
    return f"ANSWER FORMAT\nAnswer with one JSON value valid against this JSON schema:\n{schema}"

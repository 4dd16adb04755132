"""Strict pydantic bases for wire models and the parsers that turn refusals into ContractError."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Self, TypeVar, cast, get_args, get_origin

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    RootModel,
    TypeAdapter,
    ValidationError,
)
from pydantic_core import ErrorDetails

from gencoach.errors import ContractError, ContractViolation

JsonObject = dict[str, JsonValue]
NonEmptyStr = Annotated[str, Field(min_length=1)]

ModelT = TypeVar("ModelT", bound=BaseModel)
RootT = TypeVar("RootT")
T = TypeVar("T")

# Reasons a person can act on, where pydantic's wording is about its own internals.
_REASONS = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


class FieldError(ValueError):
    """Raised by a model validator to blame a named field (dotted, relative to the model)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


class ContractModel(BaseModel):
    """Base of every wire object: unknown fields, loose types and NaN/Infinity are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @classmethod
    def parse(cls, data: object) -> Self:
        """Validate decoded JSON (dicts, lists, scalars) or raise ContractError."""
        return _validate_python(cls, data, cls.__name__)

    @classmethod
    def parse_json(cls, raw: str | bytes) -> Self:
        """Validate a JSON document or raise ContractError.

        A document that cannot hold a non-finite number is validated straight from its
        text (one pass in pydantic-core); any other, and any invalid one, takes the
        decoding path, which refuses NaN/Infinity and words the error.
        """
        if not maybe_non_finite(raw if isinstance(raw, bytes) else raw.encode()):
            try:
                return cls.model_validate_json(raw, strict=True)
            except ValidationError:
                pass
        return _validate_python(cls, decode_json(raw, cls.__name__), cls.__name__)


# What a non-finite float can be written as in a document pydantic-core decodes: the
# NaN/Infinity literals, or a number too large for a double (an exponent of 3 digits or
# more, or a run of 300 digits or more).
_LARGE_EXPONENT = re.compile(rb"[eE][+-]?[0-9]{3}")
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x2E for byte in range(256))
_LONG_RUN = b"0" * 300


def maybe_non_finite(raw: bytes) -> bool:
    """Whether a JSON text may hold a NaN or infinite number (never false when it does)."""
    return (
        b"NaN" in raw
        or b"Infinity" in raw
        or _LARGE_EXPONENT.search(raw) is not None
        or _LONG_RUN in raw.translate(_DIGITS_AS_ZERO)
    )


class ContractRootModel(RootModel[RootT]):
    """Base of wire values that are not objects (JSON arrays), as strict as ContractModel."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)

    @classmethod
    def parse(cls, data: object) -> Self:
        """Validate decoded JSON or raise ContractError."""
        return _validate_python(cls, data, cls.__name__)

    @classmethod
    def parse_json(cls, raw: str | bytes) -> Self:
        """Validate a JSON document or raise ContractError."""
        return _validate_python(cls, decode_json(raw, cls.__name__), cls.__name__)


def decode_json(raw: str | bytes, model: str) -> object:
    """Decode a JSON document, refusing syntax errors and NaN/Infinity anywhere in it."""
    try:
        data = pydantic_core.from_json(raw, allow_inf_nan=True)
    except ValueError as error:
        raise ContractError(model, [ContractViolation(model, f"invalid JSON: {error}")]) from None
    _refuse_non_finite(data, model)
    return data


def parse_as(target: type[T] | TypeAdapter[T], data: object, model: str | None = None) -> T:
    """Validate decoded JSON against any type (a union, a list…) strictly or raise ContractError."""
    if isinstance(target, TypeAdapter):
        adapter, name = target, model or "value"
    else:
        adapter, name = _adapter(target), model or _type_name(target)
    _refuse_non_finite(data, name)
    try:
        return adapter.validate_python(data, strict=True)
    except ValidationError as error:
        raise _contract_error(name, error, data) from None


def parse_tagged(data: object, tag: str, choices: Mapping[str, type[ModelT]], model: str) -> ModelT:
    """Pick the model named by the `tag` field of an object among `choices`, then validate it."""
    if not isinstance(data, Mapping):
        reason = f"expected a JSON object, got {type(data).__name__}"
        raise ContractError(model, [ContractViolation(model, reason)])
    if tag not in data:
        reason = f"required field is missing; expected one of {_names(choices)}"
        raise ContractError(model, [ContractViolation(tag, reason)])
    value = data[tag]
    if not isinstance(value, str) or value not in choices:
        reason = f"unknown {tag} {value!r}; expected one of {_names(choices)}"
        raise ContractError(model, [ContractViolation(tag, reason)])
    chosen = choices[value]
    return _validate_python(chosen, data, chosen.__name__)


def _names(choices: Mapping[str, object]) -> str:
    return ", ".join(repr(name) for name in choices)


def _validate_python(cls: type[ModelT], data: object, model: str) -> ModelT:
    _refuse_non_finite(data, model)
    try:
        return cls.model_validate(data, strict=True)
    except ValidationError as error:
        raise _contract_error(model, error, data) from None


_ADAPTERS: dict[object, TypeAdapter[Any]] = {}


def _type_name(target: object) -> str:
    if get_origin(target) is Annotated:
        target = get_args(target)[0]
    return str(getattr(target, "__name__", None) or target)


def _adapter(target: Any) -> TypeAdapter[Any]:
    # Building an adapter compiles a validator: worth keeping for the types parsed often.
    try:
        adapter = _ADAPTERS.get(target)
    except TypeError:  # unhashable metadata in an Annotated type: build it every time
        return TypeAdapter(target)
    if adapter is None:
        adapter = _ADAPTERS[target] = TypeAdapter(target)
    return adapter


_LEAVES = (str, int, bool, type(None))


def _has_non_finite(data: object) -> bool:
    # The common case (nothing to refuse) is checked without building paths; decoded
    # JSON holds only dicts, lists and leaves, so exact type tests come first.
    stack = [data]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind in _LEAVES:
            continue
        if kind is float:
            if not math.isfinite(value):  # type: ignore[arg-type]
                return True
        elif kind is dict:
            stack.extend(value.values())  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:
            stack.extend(value)  # type: ignore[arg-type]
        elif isinstance(value, float):
            if not math.isfinite(value):
                return True
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            stack.extend(value)
    return False


def _refuse_non_finite(data: object, model: str) -> None:
    """Refuse NaN and ±Infinity at any depth: they are not JSON, whatever the field type."""
    if not _has_non_finite(data):
        return
    for path, value in _walk(data, ()):
        if isinstance(value, float) and not math.isfinite(value):
            field = ".".join(str(part) for part in path) or model
            reason = f"{value!r} is not a finite number; NaN and Infinity are not JSON"
            raise ContractError(model, [ContractViolation(field, reason)])


_Path = tuple[str | int, ...]


def _walk(data: object, path: _Path) -> Iterator[tuple[_Path, object]]:
    stack: list[tuple[_Path, object]] = [(path, data)]
    while stack:
        here, value = stack.pop()
        yield here, value
        if isinstance(value, Mapping):
            stack.extend(((*here, key), item) for key, item in reversed(list(value.items())))
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            stack.extend(((*here, i), item) for i, item in reversed(list(enumerate(value))))


def _contract_error(model: str, error: ValidationError, data: object) -> ContractError:
    violations = [_violation(model, detail, data) for detail in error.errors(include_url=False)]
    return ContractError(model, violations)


def _violation(model: str, detail: ErrorDetails, data: object) -> ContractViolation:
    path = _field_path(detail["loc"], data, keep_last=detail["type"] == "missing")
    reason = _REASONS.get(detail["type"], detail["msg"])
    cause = detail.get("ctx", {}).get("error")
    if isinstance(cause, FieldError):
        path = [*path, cause.field]
        reason = cause.reason
    elif isinstance(cause, ValueError):
        reason = str(cause)
    return ContractViolation(".".join(path) or model, reason)


def _field_path(loc: tuple[int | str, ...], data: object, *, keep_last: bool) -> list[str]:
    """Keep the locations that exist in the input; drop pydantic's union tags and markers."""
    path: list[str] = []
    current: object = data
    for position, part in enumerate(loc):
        found, child = _child(current, part)
        if found:
            path.append(str(part))
            current = child
        elif keep_last and position == len(loc) - 1:
            path.append(str(part))
    return path


def _child(container: object, part: int | str) -> tuple[bool, object]:
    if isinstance(container, Mapping) and part in container:
        return True, cast(Mapping[object, object], container)[part]
    if (
        isinstance(container, Sequence)
        and not isinstance(container, str | bytes)
        and isinstance(part, int)
        and 0 <= part < len(container)
    ):
        return True, container[part]
    if isinstance(container, BaseModel) and isinstance(part, str) and hasattr(container, part):
        return True, getattr(container, part)
    return False, None

"""Building the settings: file, then environment, then validation that reports every problem."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import SecretStr, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from gencoach.config.environment import KeyPath, Overlay, overlay_environment
from gencoach.config.exposure import is_loopback
from gencoach.config.files import find_config_file, read_config_file
from gencoach.config.redaction import is_secret_key, scrub
from gencoach.config.settings import NO_BACKEND, Settings
from gencoach.errors import ConfigError, ConfigProblem

_MESSAGES = {"extra_forbidden": "unknown key", "missing": "is required"}

# The API token's rule, whatever its source (a variable or a file): surrounding whitespace
# is dropped, and what is left must be at least this long. Every token is therefore also
# long enough to be masked in logs (scrubbing.MIN_SECRET_LENGTH).
MIN_TOKEN_LENGTH = 8

# Top-level sections of a MAGMA config file (`magma_core/configs/default_config.yaml`,
# `MAGMAConfig`) that only MAGMA's own pipelines read: a MAGMA file loads whole, these
# ignored with one notice. Its `backends` and `coaching` sections are gencoach's too.
MAGMA_ONLY_SECTIONS = frozenset(
    {
        "magma_agent_address",
        "magma_agent_timeout",
        "magma_planner_address",
        "generate",
        "benchmark",
        "active_backends",
    }
)


def load_settings(path: Path | None, environ: Mapping[str, str]) -> Settings:
    """Read the settings from `path` (None: ./gencoach.yaml if present) and `environ`.

    `environ` is the only environment consulted: the CLI passes `os.environ`. Its
    `GENCOACH_*` variables override the file. Raises ConfigError listing every problem.
    Safe to call again at runtime, e.g. `load_settings(settings.source, environ)` to
    pick up new budgets.
    """
    file = find_config_file(path)
    data = read_config_file(file) if file else {}
    ignored = sorted(key for key in data if key in MAGMA_ONLY_SECTIONS)
    data = {key: value for key, value in data.items() if key not in MAGMA_ONLY_SECTIONS}
    # Variables that `*_env` keys name hold secrets, not settings, even when they
    # share our prefix (GENCOACH_API_TOKEN): find them, then overlay without them.
    named = _named_variables(overlay_environment(data, environ).data)
    overlay = overlay_environment(data, environ, ignore=set(named.values()))
    problems = list(overlay.problems)
    settings: Settings | None = None
    try:
        settings = Settings.model_validate(overlay.data)
    except ValidationError as exc:
        problems += [_problem(error, overlay) for error in exc.errors()]
        problems += _coaching_without_backend(overlay)
    token: tuple[SecretStr, str] | None = None
    if settings is not None:
        read = _read_token(settings, environ, overlay)
        if isinstance(read, ConfigProblem):
            problems.append(read)
        else:
            token = read
    if problems or settings is None:
        unique = {str(problem): problem for problem in problems}
        raise ConfigError(list(unique.values()), str(file) if file else None)
    _attach_secrets(settings, environ, token)
    settings._source = file
    settings._ignored_sections = ignored
    settings._warnings = _unset_variables(named, environ, overlay, settings)
    return settings


def _named_variables(data: Mapping[str, Any]) -> dict[KeyPath, str]:
    """The environment variables the `*_env` keys name, by the key naming each."""
    named: dict[KeyPath, str] = {}
    backends = data.get("backends")
    if isinstance(backends, Mapping):
        for name, backend in backends.items():
            if isinstance(backend, Mapping) and isinstance(backend.get("api_key_env"), str):
                named[("backends", str(name), "api_key_env")] = backend["api_key_env"]
    api = data.get("api")
    if isinstance(api, Mapping) and isinstance(api.get("token_env"), str):
        named[("api", "token_env")] = api["token_env"]
    return named


def _unset_variables(
    named: dict[KeyPath, str], environ: Mapping[str, str], overlay: Overlay, settings: Settings
) -> list[str]:
    """A warning for each optional variable a `*_env` key names that is not set, saying
    what goes without it (a refusal only where a setting needs it: serving the API beyond
    loopback without a token is refused by `serve` itself)."""
    warnings = []
    for key, name in named.items():
        if not name.isidentifier() or environ.get(name):
            continue
        if key == ("api", "token_env"):
            if settings.api.token is not None:
                continue  # the token came from api.token_file
            api = settings.api
            consequence = (
                "the API has no token: its changes are open to whoever reaches it"
                if is_loopback(api.host)
                else f"the API has no token, so `gencoach serve` will refuse to serve it on "
                f"{api.host}:{api.port}"
            )
        else:
            consequence = f"no API key will be sent to backend {key[1]!r}"
        warnings.append(f"{_located(key, overlay)}: {name} is not set; {consequence}")
    return warnings


def token_problem(text: str) -> str | None:
    """Why `text` (surrounding whitespace already dropped) cannot be the API token, or None."""
    if not text:
        return "is empty or only whitespace: it must hold the bearer token"
    if len(text) < MIN_TOKEN_LENGTH:
        return (
            f"holds a token of {len(text)} characters: a token needs at least "
            f"{MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 32`)"
        )
    return None


def _read_token(
    settings: Settings, environ: Mapping[str, str], overlay: Overlay
) -> tuple[SecretStr, str] | ConfigProblem | None:
    """The API token and where it was read, by one rule for both sources: the variable
    `api.token_env` names when it is set (even to nothing), else the file `api.token_file`
    names; surrounding whitespace dropped; empty or short refused. None: no token."""
    api = settings.api
    if api.token_env and api.token_env in environ:
        token = environ[api.token_env].strip()
        problem = token_problem(token)
        if problem is not None:
            where = _located(("api", "token_env"), overlay)
            return ConfigProblem(where, f"the variable {api.token_env} {problem}")
        return SecretStr(token), api.token_env
    if api.token_file is None:
        return None
    where = _located(("api", "token_file"), overlay)
    try:
        token = api.token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        return ConfigProblem(where, f"cannot be read ({reason})", str(api.token_file), True)
    problem = token_problem(token)
    if problem is not None:
        return ConfigProblem(where, problem, str(api.token_file), True)
    return SecretStr(token), str(api.token_file)


def _attach_secrets(
    settings: Settings, environ: Mapping[str, str], token: tuple[SecretStr, str] | None
) -> None:
    for backend in settings.backends.values():
        if backend.api_key_env and environ.get(backend.api_key_env):
            backend._api_key = SecretStr(environ[backend.api_key_env])
    if token is not None:
        settings.api._token, settings.api._token_source = token


def _problem(error: ErrorDetails, overlay: Overlay) -> ConfigProblem:
    """One pydantic error as a ConfigProblem: dotted path, plain message, value unless secret."""
    location: tuple[str | int, ...] = tuple(error["loc"])
    value = error["input"]
    context = error.get("ctx") or {}
    if "key" in context:  # our cross-field errors name the key they are about
        location += tuple(str(context["key"]).split("."))
        value = context.get("value")
    message = _MESSAGES.get(error["type"], error["msg"])
    if error["type"] == "missing" or any(is_secret_key(part) for part in location):
        return ConfigProblem(_located(location, overlay), message)
    return ConfigProblem(_located(location, overlay), message, scrub(value), True)


def _coaching_without_backend(overlay: Overlay) -> list[ConfigProblem]:
    """The no-backend check on raw input, for when other errors stopped the model's own."""
    coaching, backends = overlay.data.get("coaching"), overlay.data.get("backends")
    if not isinstance(coaching, Mapping) or backends:
        return []
    try:
        enabled = TypeAdapter(bool).validate_python(coaching.get("enabled", False))
    except ValidationError:
        return []
    if not enabled:
        return []
    return [ConfigProblem(_located(("coaching", "enabled"), overlay), NO_BACKEND, True, True)]


def _located(location: tuple[str | int, ...], overlay: Overlay) -> str:
    """The dotted path of `location`, naming the variables that set it."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (the key)"
        else:
            path += f".{part}" if path else part
    variables = overlay.variables_at(location)
    return f"{path} ({', '.join(variables)})" if variables else path

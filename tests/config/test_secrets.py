"""Secrets never show: not in repr, str, the redacted dump, nor an error message."""

from __future__ import annotations

import json

import pytest

from gencoach.config import MASK, Settings, redacted
from gencoach.config.redaction import is_secret_key

from .checks import Load, Refuse, problem_at

SECRET = "Bearer s3cr3t-T0KEN"
WITH_SECRET = f"""
coaching: {{enabled: true}}
backends:
  local:
    type: ollama
    endpoint: "http://llm.internal/v1/chat/completions"
    default_model: "m"
    headers: {{Authorization: "{SECRET}", Content-type: "application/json"}}
    api_key_env: LLM_KEY
redis: {{url: "redis://:redis-pa55@cache.internal:6379/0"}}
api: {{token_env: GENCOACH_API_TOKEN}}
"""
ENV = {"LLM_KEY": "sk-llm-key-value", "GENCOACH_API_TOKEN": "api-token-value"}
HIDDEN = (SECRET, "s3cr3t", "redis-pa55", "sk-llm-key-value", "api-token-value")


def printed(settings: Settings) -> list[str]:
    """Every way the settings get printed."""
    return [repr(settings), str(settings), json.dumps(redacted(settings)), repr(redacted(settings))]


def test_secrets_never_print(load: Load) -> None:
    """Header values, API keys, the API token and the Redis password stay hidden."""
    settings = load(WITH_SECRET, ENV)
    for text in printed(settings):
        for secret in HIDDEN:
            assert secret not in text


def test_secrets_remain_usable(load: Load) -> None:
    """The code that needs a secret can still read it."""
    settings = load(WITH_SECRET, ENV)
    backend = settings.backends["local"]
    assert backend.header_values()["Authorization"] == SECRET
    assert backend.api_key is not None
    assert backend.api_key.get_secret_value() == "sk-llm-key-value"
    assert settings.api.token is not None
    assert settings.api.token.get_secret_value() == "api-token-value"
    assert settings.redis.url == "redis://:redis-pa55@cache.internal:6379/0"


def test_redacted_dump_masks_values_and_keeps_the_rest(load: Load) -> None:
    """The redacted dump keeps header names and settings, masking secret values."""
    dump = redacted(load(WITH_SECRET, ENV))
    headers = dump["backends"]["local"]["headers"]
    assert headers == {"Authorization": MASK, "Content-type": "application/json"}
    assert dump["redis"]["url"] == f"redis://:{MASK}@cache.internal:6379/0"
    assert dump["backends"]["local"]["api_key_env"] == "LLM_KEY"
    assert dump["coaching"]["max_pending_per_stage"] == 5


@pytest.mark.parametrize(
    "name", ["Authorization", "Proxy-Authorization", "X-Api-Key", "api_key", "X-Auth-Token",
             "Cookie", "X-Secret"],
)  # fmt: skip
def test_only_secret_like_headers_are_masked(load: Load, name: str) -> None:
    """Authorization, API keys, tokens and cookies are masked; an ordinary header is not."""
    text = WITH_SECRET.replace("Authorization:", f"{name}:").replace("Content-type: ", "Accept: ")
    settings = load(text, ENV)
    headers = redacted(settings)["backends"]["local"]["headers"]
    assert headers == {name: MASK, "Accept": "application/json"}
    assert SECRET not in repr(settings)
    assert settings.backends["local"].header_values()[name] == SECRET


@pytest.mark.parametrize(
    ("key", "secret"),
    [("max_tokens", False), ("access_token", True), ("X-Auth-Token", True), ("tokens_s", False)],
)
def test_token_counts_are_not_secrets(key: str, *, secret: bool) -> None:
    """`max_tokens` is a count `config check` shows; a token itself is masked."""
    assert is_secret_key(key) is secret


def test_variable_named_by_token_env_is_not_an_unknown_setting(load: Load) -> None:
    """GENCOACH_API_TOKEN, named by api.token_env, is read as the token, not as a setting."""
    settings = load("api: {token_env: GENCOACH_API_TOKEN}", {"GENCOACH_API_TOKEN": "tok-value"})
    assert settings.api.token is not None


@pytest.mark.parametrize(
    ("text", "env", "path"),
    [
        (  # a misspelt section is echoed in its error, secrets masked
            WITH_SECRET.replace("backends:", "backend:"),
            ENV,
            "backend",
        ),
        (  # a header value of the wrong type
            WITH_SECRET.replace(f'"{SECRET}"', f'["{SECRET}"]'),
            ENV,
            "backends.local.headers.Authorization",
        ),
        (  # an undeclared key that looks secret
            WITH_SECRET.replace("api_key_env: LLM_KEY", f"api_key: '{SECRET}'"),
            {},
            "backends.local.api_key",
        ),
        (  # an undeclared key in a misspelt variable
            "",
            {"GENCOACH_BACKEND__X__HEADERS__AUTHORIZATION": SECRET},
            "backend (GENCOACH_BACKEND__X__HEADERS__AUTHORIZATION)",
        ),
        (  # a header as JSON that does not parse
            "",
            {"GENCOACH_BACKENDS__X__HEADERS": '{"Authorization": "' + SECRET},
            "backends.x.headers (GENCOACH_BACKENDS__X__HEADERS)",
        ),
        (  # broken YAML on a header's line
            WITH_SECRET.replace(f'"{SECRET}"', f"{SECRET}: x"),
            ENV,
            "line 8, column 49",
        ),
        (  # broken YAML on a line nested under headers
            WITH_SECRET.replace(
                f'headers: {{Authorization: "{SECRET}", Content-type: "application/json"}}',
                f"headers:\n      X-Custom: {SECRET}: x",
            ),
            ENV,
            "line 9, column 36",
        ),
        (  # an invalid Redis URL with a password
            WITH_SECRET.replace("@cache.internal:6379/0", "@/0"),
            ENV,
            "redis.url",
        ),
    ],
)
def test_secrets_never_appear_in_errors(
    refuse: Refuse, text: str, env: dict[str, str], path: str
) -> None:
    """An error about a value that holds a secret names the key but not the secret."""
    error = refuse(text, env)
    problem_at(error, path)
    for secret in HIDDEN:
        assert secret not in str(error)
        assert all(secret not in repr(problem.value) for problem in error.problems)

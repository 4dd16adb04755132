"""Optional secrets: an unset variable is a warning with its consequence, and the API's
token may come from a file (a Docker secret) as well as from a variable."""

from __future__ import annotations

from pathlib import Path

from gencoach.config import redacted, scrubbing

from .checks import Load, Refuse, problem_at

BACKEND = """
backends:
  local:
    type: openai
    endpoint: http://127.0.0.1:11434/v1/chat/completions
    default_model: m
    api_key_env: OPENAI_API_KEY
"""


def test_an_unset_api_key_variable_is_a_warning_saying_no_key_is_sent(load: Load) -> None:
    settings = load(BACKEND, {})
    assert settings.backends["local"].api_key is None
    assert settings.warnings == [
        "backends.local.api_key_env: OPENAI_API_KEY is not set; "
        "no API key will be sent to backend 'local'"
    ]


def test_an_empty_variable_counts_as_unset(load: Load) -> None:
    assert load(BACKEND, {"OPENAI_API_KEY": ""}).backends["local"].api_key is None


def test_an_unset_token_variable_is_a_warning_saying_the_api_is_open(load: Load) -> None:
    """On loopback (the default) an unset token variable leaves the API open to whoever
    reaches it there, and the warning says so."""
    settings = load("api: {token_env: GENCOACH_API_TOKEN}", {})
    assert settings.api.token is None
    assert settings.warnings == [
        "api.token_env: GENCOACH_API_TOKEN is not set; "
        "the API has no token: its changes are open to whoever reaches it"
    ]


def test_an_unset_token_variable_beyond_loopback_says_serve_will_refuse(load: Load) -> None:
    """On an address other than loopback the API is not open without a token: the warning
    says `serve` will refuse to serve it."""
    settings = load("api: {host: 0.0.0.0, token_env: GENCOACH_API_TOKEN}", {})
    assert settings.warnings == [
        "api.token_env: GENCOACH_API_TOKEN is not set; "
        "the API has no token, so `gencoach serve` will refuse to serve it on 0.0.0.0:8750"
    ]


def test_set_variables_give_their_values_and_no_warning(load: Load) -> None:
    env = {"OPENAI_API_KEY": "sk-key-value", "GENCOACH_API_TOKEN": "token-value"}
    settings = load(BACKEND + "api: {token_env: GENCOACH_API_TOKEN}", env)
    assert settings.warnings == []
    key = settings.backends["local"].api_key
    assert key is not None
    assert key.get_secret_value() == "sk-key-value"


def test_the_token_is_read_from_token_file_without_surrounding_whitespace(
    load: Load, tmp_path: Path
) -> None:
    secret = tmp_path / "api_token"
    secret.write_text("file-token-value\n")
    settings = load(f"api: {{token_file: {secret}}}")
    assert settings.api.token is not None
    assert settings.api.token.get_secret_value() == "file-token-value"
    assert "file-token-value" in scrubbing.secret_values(settings)
    assert settings.api.token_source == str(secret)
    assert redacted(settings)["api"]["token_file"] == str(secret)


def test_the_variable_wins_over_the_file_and_an_unset_one_falls_back_silently(
    load: Load, tmp_path: Path
) -> None:
    secret = tmp_path / "api_token"
    secret.write_text("file-token-value")
    text = f"api: {{token_env: GENCOACH_API_TOKEN, token_file: {secret}}}"
    from_env = load(text, {"GENCOACH_API_TOKEN": "env-token-value"})
    assert from_env.api.token is not None
    assert from_env.api.token.get_secret_value() == "env-token-value"
    assert from_env.api.token_source == "GENCOACH_API_TOKEN"
    from_file = load(text, {})
    assert from_file.api.token is not None
    assert from_file.api.token.get_secret_value() == "file-token-value"
    assert from_file.warnings == []


def test_a_token_file_that_cannot_be_read_is_refused_naming_it(
    refuse: Refuse, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    problem = problem_at(refuse(f"api: {{token_file: {missing}}}"), "api.token_file")
    assert problem.message == "cannot be read (No such file or directory)"
    assert str(missing) in str(problem)


def test_an_empty_token_file_is_refused(refuse: Refuse, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text(" \n")
    problem = problem_at(refuse(f"api: {{token_file: {empty}}}"), "api.token_file")
    assert problem.message == "is empty or only whitespace: it must hold the bearer token"

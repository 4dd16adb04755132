"""The API token's one rule, whatever its source: surrounding whitespace dropped, empty or
short refused at start-up naming the key, and every token accepted is masked in logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gencoach.config import scrubbing
from gencoach.config.loading import MIN_TOKEN_LENGTH

from .checks import Load, Refuse, problem_at

ENV = "api: {host: 0.0.0.0, token_env: GENCOACH_API_TOKEN}"


@pytest.mark.parametrize("value", ["", "   ", " \t\n"])
def test_an_empty_or_whitespace_token_variable_is_refused_like_a_token_file(
    refuse: Refuse, value: str
) -> None:
    """A token variable that is set but holds only whitespace is a configuration error,
    not a token that answers every request 401/403."""
    error = refuse(ENV, {"GENCOACH_API_TOKEN": value})
    problem = problem_at(error, "api.token_env")
    assert problem.message == (
        "the variable GENCOACH_API_TOKEN is empty or only whitespace: it must hold the bearer token"
    )


def test_a_whitespace_token_file_is_refused_with_the_same_reason(
    refuse: Refuse, tmp_path: Path
) -> None:
    """The file and the variable give the same reason for the same content."""
    blank = tmp_path / "blank"
    blank.write_text(" \n\t")
    problem = problem_at(refuse(f"api: {{token_file: {blank}}}"), "api.token_file")
    assert problem.message == "is empty or only whitespace: it must hold the bearer token"


@pytest.mark.parametrize("token", ["Q", "Zq9#x", "Zq9#xW!"])
def test_a_short_token_is_refused_from_the_variable_and_from_the_file(
    refuse: Refuse, tmp_path: Path, token: str
) -> None:
    """Below the minimum length a token is refused from either source, without quoting it."""
    reason = (
        f"holds a token of {len(token)} characters: a token needs at least "
        f"{MIN_TOKEN_LENGTH} (e.g. `openssl rand -hex 32`)"
    )
    from_env = refuse(ENV, {"GENCOACH_API_TOKEN": f" {token} "})
    assert problem_at(from_env, "api.token_env").message == (
        f"the variable GENCOACH_API_TOKEN {reason}"
    )
    assert token not in str(from_env).replace("GENCOACH_API_TOKEN", "")
    secret = tmp_path / "short"
    secret.write_text(token)
    assert problem_at(refuse(f"api: {{token_file: {secret}}}"), "api.token_file").message == (
        reason
    )


def test_a_variable_token_loses_its_surrounding_whitespace_like_a_file_token(
    load: Load, tmp_path: Path
) -> None:
    """`GENCOACH_API_TOKEN=" tok…\\n"` and a file holding the same give the same token."""
    from_env = load(ENV, {"GENCOACH_API_TOKEN": "  env-token-value\n"})
    assert from_env.api.token is not None
    assert from_env.api.token.get_secret_value() == "env-token-value"
    secret = tmp_path / "token"
    secret.write_text("  env-token-value\n")
    from_file = load(f"api: {{token_file: {secret}}}")
    assert from_file.api.token is not None
    assert from_file.api.token.get_secret_value() == "env-token-value"


def test_the_shortest_token_accepted_is_masked_in_logs(load: Load) -> None:
    """No accepted token is too short to be masked: one of the minimum length is `***`."""
    token = "k" * MIN_TOKEN_LENGTH
    settings = load(ENV, {"GENCOACH_API_TOKEN": token})
    assert token in scrubbing.secret_values(settings)
    scrubbing.install(scrubbing.secret_values(settings))
    try:
        assert scrubbing.scrub(f"Bearer {token} refused") == "Bearer *** refused"
    finally:
        scrubbing.install(())

"""The API is never served beyond loopback without a token."""

from __future__ import annotations

import pytest

from gencoach.config import load_settings
from gencoach.config.exposure import is_loopback, unprotected_exposure


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.53", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host: str) -> None:
    """Addresses that reach only this machine count as loopback."""
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "controller", "example.org"])  # noqa: S104
def test_other_hosts(host: str) -> None:
    """Wildcards, other addresses and host names count as reachable from elsewhere."""
    assert not is_loopback(host)


def test_wildcard_without_token_is_refused_with_the_fix() -> None:
    """0.0.0.0 without a token is refused, naming the address and both ways out."""
    settings = load_settings(None, {"GENCOACH_API__HOST": "0.0.0.0"})  # noqa: S104
    problem = unprotected_exposure(settings.api)
    assert problem == (
        "refusing to serve the API on 0.0.0.0:8750 without a token: set api.token_env to a "
        "variable holding one (GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN and "
        "GENCOACH_API_TOKEN=...) or api.token_file to a file holding one, or set api.host to "
        "127.0.0.1"
    )


def test_wildcard_with_token_is_allowed() -> None:
    """A token makes any address acceptable."""
    environ = {
        "GENCOACH_API__HOST": "0.0.0.0",  # noqa: S104
        "GENCOACH_API__TOKEN_ENV": "MY_TOKEN",
        "MY_TOKEN": "a-long-secret",
    }
    assert unprotected_exposure(load_settings(None, environ).api) is None


def test_loopback_without_token_is_allowed() -> None:
    """The default, loopback without a token, is served."""
    assert unprotected_exposure(load_settings(None, {}).api) is None

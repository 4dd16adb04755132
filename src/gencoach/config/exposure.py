"""Whether the HTTP API would be reachable from other machines without a token."""

from __future__ import annotations

import ipaddress

from gencoach.config.settings import ApiSettings

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (127.0.0.0/8, ::1 or localhost)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def unprotected_exposure(api: ApiSettings) -> str | None:
    """Why serving the API as configured would expose it without a token, or None if safe."""
    if api.token is not None or is_loopback(api.host):
        return None
    return (
        f"refusing to serve the API on {api.host}:{api.port} without a token: "
        "set api.token_env to a variable holding one "
        "(GENCOACH_API__TOKEN_ENV=GENCOACH_API_TOKEN and GENCOACH_API_TOKEN=...) "
        "or api.token_file to a file holding one, or set api.host to 127.0.0.1"
    )

"""Checks for the URLs the settings hold, and the agent allow-list match."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

REDIS_EMBEDDED = "embedded"
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - recognised, not bound
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _split(url: str) -> tuple[SplitResult, int | None] | str:
    """The parts and port of `url`, or why it does not parse."""
    try:
        parts = urlsplit(url)
        return parts, parts.port
    except ValueError as exc:
        return f"does not parse as a URL: {exc}"


def redis_url_problem(url: str) -> str | None:
    """Why `url` is not a usable Redis location, or None when it is."""
    if url == REDIS_EMBEDDED:
        return None
    split = _split(url)
    if isinstance(split, str):
        return split
    parts, _ = split
    if parts.scheme == "unix":
        return None if parts.path else "a unix:// URL needs a socket path"
    if parts.scheme not in ("redis", "rediss"):
        return "must be 'embedded' or a redis://, rediss:// or unix:// URL"
    if not parts.hostname:
        return "a redis:// URL needs a host"
    database = parts.path.strip("/")
    if database and not database.isdigit():
        return "the database (the URL path) must be a number"
    return None


def http_url_problem(url: str, *, prefix: bool = False) -> str | None:
    """Why `url` is not an http(s) URL with a host (a bare prefix if asked), or None."""
    split = _split(url)
    if isinstance(split, str):
        return split
    parts, _ = split
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "the URL needs a host"
    if prefix and (parts.query or parts.fragment):
        return "a URL prefix takes no query or fragment"
    return None


def url_has_prefix(url: str, prefix: str) -> bool:
    """Whether `url` lies under `prefix`: same scheme and host, its port if named, its path."""
    split_url, split_prefix = _split(url), _split(prefix)
    if isinstance(split_url, str) or isinstance(split_prefix, str):
        return False
    (target, target_port), (allowed, allowed_port) = split_url, split_prefix
    scheme = target.scheme.lower()
    if not target.hostname or scheme != allowed.scheme.lower():
        return False
    if target.hostname != allowed.hostname:
        return False
    if allowed_port is not None and (target_port or _DEFAULT_PORTS.get(scheme)) != allowed_port:
        return False
    segments = target.path.split("/")
    if "." in segments or ".." in segments:
        return False  # a dot segment could climb out of the allowed path
    base = allowed.path.rstrip("/")
    path = target.path or "/"
    return not base or path == base or path.startswith(base + "/")


def api_url(host: str, port: int) -> str:
    """Where a local client reaches an API bound to `host:port` (a wildcard on loopback)."""
    if host in _WILDCARDS:
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"

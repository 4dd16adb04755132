"""Hiding secrets from everything that prints settings: logs, `config show`, error messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import SecretStr

if TYPE_CHECKING:
    from gencoach.config.settings import Settings

MASK = "**********"

# Keys whose value is a secret wherever they appear, including under keys nobody
# declared (an unknown `api_key:` is echoed in its error otherwise). `*_env` and `*_file`
# keys only name a variable or a file, and are not secret themselves; `tokens` counts them
# (`max_tokens`).
_SECRET_KEY = re.compile(
    r"auth(?!ors?\b)|api[_-]?key|token(?!s)|secret|passw(or)?d|credential|cookie",
    re.IGNORECASE,
)
# Mappings an error message never echoes (a broken one may hold a secret anywhere); once
# valid, only their secret-like entries are masked (`Authorization`, not `Content-type`).
_SECRET_CONTAINERS = frozenset({"headers"})


def is_secret_key(key: object) -> bool:
    """Whether a setting called `key` holds a secret (or a mapping of secrets)."""
    if not isinstance(key, str) or key.lower().endswith(("_env", "_file")):
        return False
    return key.lower() in _SECRET_CONTAINERS or _SECRET_KEY.search(key) is not None


def mask_password(url: str) -> str:
    """`url` with the password of its user-info, if any, replaced by the mask."""
    if "@" not in url:
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{parts.username or ''}:{MASK}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def scrub(value: Any) -> Any:
    """A copy of a JSON-like value safe to print: secret values masked, URL passwords too."""
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, str):
        return mask_password(value)
    if isinstance(value, Mapping):
        return {key: _scrub_entry(key, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(item) for item in value]
    return value


def _scrub_entry(key: object, item: Any) -> Any:
    if isinstance(key, str) and key.lower() in _SECRET_CONTAINERS and isinstance(item, Mapping):
        return scrub(item)  # each entry masked by its own name
    return _mask_all(item) if is_secret_key(key) else scrub(item)


def _mask_all(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _mask_all(item) for key, item in value.items()}
    return None if value is None else MASK


def redacted(settings: Settings) -> dict[str, Any]:
    """The settings as a JSON-able dict in which no secret appears."""
    dumped: dict[str, Any] = scrub(settings.model_dump(mode="json"))
    return dumped

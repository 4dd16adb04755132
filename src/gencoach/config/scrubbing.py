"""Masking configured secret values in any text gencoach stores, logs or serves.

`install` takes the secret values of the loaded settings (`secret_values`); `scrub`
replaces each occurrence with `***` in log lines, request reasons, coaching logs and API
answers. Key-based redaction (`gencoach.config.redaction`) hides a secret where it is
named; this catches one echoed into free text ("Incorrect API key provided: sk-...").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from gencoach.config.redaction import is_secret_key

if TYPE_CHECKING:
    from gencoach.config.settings import Settings

SECRET_MASK: Final = "***"  # noqa: S105 - the mask itself, not a secret
# Shorter values would mask ordinary words; no real credential is this short.
MIN_SECRET_LENGTH: Final = 6

_pattern: re.Pattern[str] | None = None


def secret_values(settings: Settings) -> set[str]:
    """Every secret value the settings hold: credential header values (`Authorization`,
    `X-Api-Key`, ...), also without a scheme such as `Bearer`; API keys; the API token.
    Every process that loads settings installs them (`install`)."""
    found: set[str] = set()
    for backend in settings.backends.values():
        for name, value in backend.headers.items():
            if not is_secret_key(name):
                continue  # Content-Type and the like: masking them would mask plain words
            text = value
            found.add(text)
            scheme, _, credential = text.partition(" ")
            if credential and scheme.isalpha():
                found.add(credential.strip())
        if backend.api_key is not None:
            found.add(backend.api_key.get_secret_value())
    if settings.api.token is not None:
        found.add(settings.api.token.get_secret_value())
    return {value for value in found if len(value) >= MIN_SECRET_LENGTH}


def install(secrets: Iterable[str]) -> None:
    """Mask these values from now on in this process (replacing what was installed)."""
    global _pattern
    values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
    _pattern = re.compile("|".join(re.escape(value) for value in values)) if values else None


def scrub(text: str) -> str:
    """`text` with every installed secret value replaced by `***`."""
    if _pattern is None:
        return text
    return _pattern.sub(SECRET_MASK, text)


def scrub_value(value: Any) -> Any:
    """A JSON-like value with every string in it scrubbed."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {key: scrub_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_value(item) for item in value]
    return value

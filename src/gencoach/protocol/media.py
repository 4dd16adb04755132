"""The media type of a request body: JSON, sent as `application/json`.

Every route that takes a body, on the controller's API and on an agent's, reads JSON
only and answers any other Content-Type (`text/plain`, a form, none) with 415. Web pages
can send those three without asking first (a form, or a "simple" cross-origin request),
so a page the operator opens cannot post to a server listening on loopback.
"""

from __future__ import annotations

JSON_MEDIA_TYPE = "application/json"


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON (`application/json`, or `…+json`)."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == JSON_MEDIA_TYPE or (
        media.startswith("application/") and media.endswith("+json")
    )


def not_json_refusal(content_type: str | None) -> str | None:
    """Why a body sent with this Content-Type is refused (answered 415), or None for JSON."""
    if is_json_media_type(content_type):
        return None
    shown = repr(content_type) if content_type else "none"
    return f"the body must be JSON: send Content-Type: {JSON_MEDIA_TYPE} (got {shown})"

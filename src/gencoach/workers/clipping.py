"""Bounding foreign text where it enters a worker: LLM answers, agents' logs and reasons.

`clip` cuts a text at a number of UTF-8 bytes, with a note of how much was cut, so a
broken model or proxy answering megabytes costs kilobytes. Which texts, and the settings
that bound them: docs/operations.md, "Bounded state".
"""

from __future__ import annotations


def utf8_size(text: str) -> int:
    """The size of `text` in UTF-8."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def clip(text: str, max_bytes: int) -> str:
    """`text` if it fits in `max_bytes` of UTF-8, else its first bytes (whole characters)
    and a note of how many bytes were cut, all within `max_bytes` when it allows one."""
    raw = text.encode("utf-8", errors="surrogatepass")
    if len(raw) <= max_bytes:
        return text
    note = f"\n[... {len(raw):,} bytes in all, cut to {max_bytes:,}]"
    keep = max(0, max_bytes - len(note.encode()))
    head = raw[:keep].decode("utf-8", errors="ignore")
    return head + note

"""Training pairs a dataset holds once: identical (context, target) pairs across rows.

`Seen` records the pairs a dataset holds; `pair_form` and `pair_key` encode messages and
pairs as they are compared. See docs/export.md ("Rows that do not repeat themselves").
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b
from typing import Any

from pydantic_core import to_json

_DIGEST = 16
_TARGET = b"\x1e"
_CONTEXT = b"\x1f"


def _key_form(message: Any) -> Any:
    """A message as a pair compares it: tool-call ids (per-answer numbering) left out."""
    if not isinstance(message, dict):
        return message
    form = {key: value for key, value in message.items() if key != "tool_call_id"}
    calls = form.get("tool_calls")
    if isinstance(calls, list):
        form["tool_calls"] = [
            {k: v for k, v in call.items() if k != "id"} if isinstance(call, dict) else call
            for call in calls
        ]
    return form


def pair_form(value: Any) -> bytes:
    """A message (or the context's opening) as pairs compare it, encoded once. Keys stay
    in their order: an export builds every message with its keys in one order."""
    return to_json(_key_form(value))


def pair_key(head: bytes, messages: Sequence[bytes]) -> bytes:
    """The digest of the pair whose target is the last of `messages` (in `pair_form`,
    after `head`): what `Seen.first` records for it."""
    running = blake2b(head, digest_size=_DIGEST)
    for encoded in messages[:-1]:
        running.update(_CONTEXT + encoded)
    running.update(_TARGET + messages[-1])
    return running.digest()


class Seen:
    """The (context, target) pairs a dataset holds so far, as 16-byte digests.

    A pair is the conversation up to an assistant message (with the tools) and that
    message, tool-call ids aside (they number the answers of a save). The first row to
    hold a pair trains on it; later rows keep the message as context only (not
    trainable), and a row left with no target is not written.
    """

    def __init__(self) -> None:
        self._pairs: set[bytes] = set()
        self.duplicates = 0

    def first(self, head: bytes, messages: Sequence[bytes], targets: set[int]) -> set[int]:
        """Of the messages at `targets`, those whose pair (after `head`: what opens the
        context) is new, now seen; the others are counted as duplicates. Messages come in
        `pair_form`."""
        running = blake2b(head, digest_size=_DIGEST)
        new: set[int] = set()
        for index, encoded in enumerate(messages):
            if index in targets:
                pair = running.copy()
                pair.update(_TARGET + encoded)
                digest = pair.digest()
                if digest in self._pairs:
                    self.duplicates += 1
                else:
                    self._pairs.add(digest)
                    new.add(index)
            running.update(_CONTEXT + encoded)
        return new

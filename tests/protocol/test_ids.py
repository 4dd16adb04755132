"""The id rule: the printable-ASCII fast path answers as the character-by-character check."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from gencoach.protocol.ids import MAX_ID_LENGTH, id_problem

FORBIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _allowed(value: str) -> bool:
    return (
        0 < len(value) <= MAX_ID_LENGTH
        and "{" not in value
        and "}" not in value
        and all(unicodedata.category(char) not in FORBIDDEN for char in value)
    )


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_the_fast_path_agrees_with_the_rule(value: str) -> None:
    assert (id_problem(value) is None) == _allowed(value)


def test_what_the_rule_refuses_is_named() -> None:
    assert id_problem("run{1}") == (
        "character '{' (U+007B) at position 3 is not allowed in an id (1 to 256 printable "
        "characters, without control or format characters, line separators, '{' or '}')"
    )
    assert id_problem("a\x7fb") is not None  # DEL is ASCII and not printable
    assert id_problem("plain id/with #marks?%") is None
    assert id_problem("héllo wörld") is None

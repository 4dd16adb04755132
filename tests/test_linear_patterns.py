"""Every regular expression gencoach applies to foreign text runs in linear time.

The patterns are found by importing every module of the package and collecting the
compiled patterns it holds (alone or in a list or tuple), so a new one is covered
without being listed here. Each is run over 100,000-character adversarial strings built
from its own characters (the shapes that make a backtracking pattern rescan from every
position); a linear pattern takes milliseconds on them, a quadratic one minutes. Python's
regex engine checks for signals while it matches, so a pattern over its generous time is
interrupted and fails the test instead of hanging it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import signal
import string
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType, ModuleType

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import gencoach
from gencoach.config import scrubbing
from gencoach.errors import ContractError
from gencoach.protocol.llm import FailureDiagnosisAnswer, parse_llm_answer
from gencoach.runtime.logs import MAX_FIELD_CHARS, cap, redact

LENGTH = 100_000
GENEROUS_S = 5.0  # a linear pattern takes a few ms on LENGTH characters, even under load
# Modules that need an optional extra (torch) or run the CLI when imported hold no pattern.
_OPTIONAL = ("gencoach.library.torch", "gencoach.__main__")


def _modules() -> Iterator[ModuleType]:
    for info in pkgutil.walk_packages(gencoach.__path__, "gencoach."):
        if info.name.startswith(_OPTIONAL):
            continue
        yield importlib.import_module(info.name)


def _patterns_in(value: object) -> Iterator[re.Pattern[str] | re.Pattern[bytes]]:
    if isinstance(value, re.Pattern):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _patterns_in(item)


def _all_patterns() -> dict[str, re.Pattern[str] | re.Pattern[bytes]]:
    scrubbing.install(["sk-live-0123456789", "tok-abcdef"])  # the installed secrets' pattern
    found: dict[str, re.Pattern[str] | re.Pattern[bytes]] = {}
    seen: set[int] = set()
    for module in _modules():
        for name, value in vars(module).items():
            for index, pattern in enumerate(_patterns_in(value)):
                if id(pattern) not in seen:
                    seen.add(id(pattern))
                    found[f"{module.__name__}.{name}[{index}]"] = pattern
    return found


PATTERNS = _all_patterns()
# Patterns gencoach only ever applies anchored (`match`, `fullmatch`): tried from the
# first character only, they are checked so. Every other one is also searched for.
ANCHORED = {
    "gencoach.agents.reference.tasks._QUESTION[0]",
    "gencoach.agents.reference.tasks._TASKS[0]",
    "gencoach.agents.reference.tasks._TASKS[1]",
    "gencoach.agents.reference.tasks._TASKS[2]",
    "gencoach.agents.reference.tasks._TASKS[3]",
    "gencoach.config.fields._ENV_NAME[0]",
    "gencoach.config.fields._INTEGER[0]",
    "gencoach.export.sources._SITUATION_FILE[0]",
    "gencoach.graph.writer._SAFE_NAME[0]",
    "gencoach.protocol.decision_text._ARG[0]",
    "gencoach.protocol.decision_text._CALL[0]",
    "gencoach.protocol.decision_text._SAY[0]",
    "gencoach.protocol.graph._PEP440[0]",
}


@contextmanager
def _within(seconds: float, what: str) -> Iterator[None]:
    def expire(_signum: int, _frame: FrameType | None) -> None:
        raise TimeoutError(f"{what} ran longer than {seconds} s on {LENGTH} characters")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _alphabet(pattern: re.Pattern[str] | re.Pattern[bytes]) -> str:
    source = pattern.pattern if isinstance(pattern.pattern, str) else pattern.pattern.decode()
    own = {c for c in source if c.isprintable() and c not in "\\"}
    return "".join(sorted(own | set("aZ09 \t\n:/@`.")))


def _adversarial(alphabet: str) -> st.SearchStrategy[str]:
    # A unit of one to three of the pattern's characters, repeated: a long run of what one
    # quantifier accepts is what a backtracking pattern rescans.
    few = st.lists(st.sampled_from(alphabet), min_size=1, max_size=3, unique=True)
    unit = few.flatmap(lambda chars: st.text("".join(chars), min_size=1, max_size=6))
    edge = st.text(alphabet + string.ascii_letters, max_size=12)
    return st.builds(
        lambda head, body, tail: (head + body * (LENGTH // len(body) + 1))[:LENGTH] + tail,
        edge,
        unit,
        edge,
    )


def _exercise(name: str, text: str) -> None:
    pattern = PATTERNS[name]
    subject: str | bytes = text if isinstance(pattern.pattern, str) else text.encode()
    pattern.match(subject)  # type: ignore[arg-type]
    pattern.fullmatch(subject)  # type: ignore[arg-type]
    if name not in ANCHORED:
        pattern.findall(subject)  # type: ignore[arg-type]
        pattern.sub(subject[:0], subject)  # type: ignore[arg-type]


def test_the_patterns_are_found() -> None:
    """The discovery sees the patterns the tests below must cover."""
    names = " ".join(PATTERNS)
    for expected in ("gencoach.runtime.logs._URL_PASSWORD", "gencoach.protocol.events", "_TASKS"):
        assert expected in names
    assert len(PATTERNS) >= 20
    assert set(PATTERNS) >= ANCHORED


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_each_pattern_is_linear_on_long_adversarial_text(name: str) -> None:
    """100,000 characters of the pattern's own characters, repeated, match in bounded time."""
    pattern = PATTERNS[name]

    @settings(
        max_examples=12,
        deadline=None,
        phases=(Phase.generate,),  # shrinking 100 kB strings takes minutes and says little
        suppress_health_check=list(HealthCheck),
    )
    @given(_adversarial(_alphabet(pattern)))
    def check(text: str) -> None:
        with _within(GENEROUS_S, name):
            _exercise(name, text)

    check()


@pytest.mark.parametrize(
    "text",
    [
        "x" * LENGTH,  # the run of letters that made URL redaction quadratic
        "a1" * (LENGTH // 2),
        "redis" * (LENGTH // 5) + "://user:pw@host",
        "://" + ":" * LENGTH,
        "http://" * (LENGTH // 7),
    ],
)
def test_redaction_of_long_text_is_bounded(text: str) -> None:
    """Redacting a log field of 100,000 characters is interrupted if it takes too long."""
    with _within(GENEROUS_S, "redact"):
        redact(text)
        redact(cap(text))


def test_fenced_answers_of_long_whitespace_parse_in_bounded_time() -> None:
    """A ```json fence full of spaces is refused quickly, not rescanned from every space."""
    with _within(GENEROUS_S, "parse_llm_answer"), pytest.raises(ContractError):
        parse_llm_answer(FailureDiagnosisAnswer, "```json\nx" + " " * LENGTH + "y")


def test_url_passwords_are_still_redacted_after_a_long_scheme() -> None:
    """Finding the password from its `://` still hides it behind any run of letters."""
    assert "pw" not in redact("x" * 10_000 + "redis://user:pw@host/0")
    assert redact("see postgres://me:hunter2@db:5432/x") == "see postgres://me:**********@db:5432/x"


def test_long_log_fields_are_cut_with_their_length_noted() -> None:
    """A field over MAX_FIELD_CHARS keeps its start and says how long it was."""
    text = "y" * 10 * MAX_FIELD_CHARS
    shown = cap(text)
    assert shown.startswith("y" * MAX_FIELD_CHARS)
    assert shown.endswith(f"[cut: {len(text)} characters in all]")
    assert len(shown) < MAX_FIELD_CHARS + 50
    assert cap({"a": [text]})["a"][0] == shown
    assert cap("short") == "short"

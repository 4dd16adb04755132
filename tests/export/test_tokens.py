"""`--tokenizer` without its extra, and the budget flags checked before any work.

Token counts with real tokenizers (a GGUF file, a Hugging Face model folder) are tested in
the trainers suite (tests/trainers), where transformers is installed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gencoach.errors import ExportError
from gencoach.export.command import EXIT_UNUSABLE, export_command
from gencoach.export.tokens import TokenSettings, load_tokenizer
from tests.support.saved_runs import write_run


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is not None, reason="transformers is installed"
)
def test_a_tokenizer_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """The main install stays lean: counting tokens names the `tokens` extra."""
    with pytest.raises(ExportError) as caught:
        load_tokenizer(tmp_path / "model.gguf")
    assert caught.value.reason == (
        "--tokenizer needs transformers (and gguf for a GGUF file): install gencoach's "
        "tokens extra, pip install 'gencoach[tokens]'"
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"over_budget": "shorten"}, "--over-budget must be one of keep, drop, truncate"),
        ({"max_tokens": 0}, "--max-tokens must be at least 1, got 0"),
        ({"over_budget": "drop"}, "--over-budget drop needs --max-tokens"),
    ],
)
def test_bad_budget_settings_are_named(
    tmp_path: Path, settings: dict[str, object], message: str
) -> None:
    """Each inconsistent budget setting says what it needs."""
    with pytest.raises(ExportError) as caught:
        TokenSettings(tmp_path, **settings)  # type: ignore[arg-type]
    assert caught.value.reason.startswith(message)


def test_a_budget_without_a_tokenizer_is_refused(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--max-tokens` alone exits 2 before anything is written."""
    write_run(source / "run")
    code = export_command(
        source, "chat", None, 0.05, 42, 42, False, None, False, tokens=(None, 100, "keep")
    )
    assert code == EXIT_UNUSABLE
    assert capsys.readouterr().err == "error: --max-tokens and --over-budget need --tokenizer\n"
    assert not (source / "datasets").exists()

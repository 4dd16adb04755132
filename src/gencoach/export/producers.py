"""Which producers an export accepts: MAGMA-GEN's producer-identity check, for every format.

`check_producers` splits the saves into compatible and refused ones, by what was
accepted (`Accepted`: the option `agents`, `--from`, or a MAGMA exporter's own identity).
See docs/export.md ("Which producers").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from gencoach.errors import ExportError
from gencoach.export.filters import newest_last
from gencoach.export.sources import Save, Skipped
from gencoach.protocol import UNKNOWN_AGENT

AGENTS_EXPECTED = (
    'a list of {"agent_id": str, "agent_version": str or [str, ...] (optional)} objects'
)


@dataclass(frozen=True)
class Accepted:
    """An agent id and the versions of it accepted (None: any version)."""

    agent_id: str
    versions: frozenset[str] | None = None

    def admits(self, save: Save) -> bool:
        """Whether the save's producer is this one."""
        return save.agent_id == self.agent_id and (
            self.versions is None or save.agent_version in self.versions
        )

    def __str__(self) -> str:
        if self.versions is None:
            return f"{self.agent_id} (any version)"
        return f"{self.agent_id} {', '.join(sorted(self.versions))}"


def parse_agents(value: JsonValue, where: str = "option 'agents'") -> list[Accepted]:
    """`[{"agent_id", "agent_version"?}]`, the version a string or a list of them."""
    if not isinstance(value, list) or not value:
        raise ExportError(f"{where} must be {AGENTS_EXPECTED}, got {value!r}")
    accepted: list[Accepted] = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"agent_id", "agent_version"}:
            raise ExportError(f"{where} must be {AGENTS_EXPECTED}, got {item!r}")
        agent_id, version = item.get("agent_id"), item.get("agent_version")
        versions: frozenset[str] | None
        if isinstance(version, str):
            versions = frozenset([version])
        elif isinstance(version, list) and version and all(isinstance(v, str) for v in version):
            versions = frozenset(v for v in version if isinstance(v, str))
        elif version is None:
            versions = None
        else:
            raise ExportError(f"{where} must be {AGENTS_EXPECTED}, got {item!r}")
        if not isinstance(agent_id, str) or not agent_id:
            raise ExportError(f"{where} must be {AGENTS_EXPECTED}, got {item!r}")
        accepted.append(Accepted(agent_id, versions))
    return accepted


def parse_from(values: Sequence[str]) -> list[Accepted]:
    """`--from AGENT[@VERSION]` flags; one agent named twice accepts both versions."""
    versions: dict[str, set[str] | None] = {}
    for value in values:
        agent_id, at, version = value.partition("@")
        if not agent_id or (at and not version):
            raise ExportError(f"--from must be AGENT or AGENT@VERSION, got {value!r}")
        if not at:
            versions[agent_id] = None
        elif agent_id not in versions:
            versions[agent_id] = {version}
        elif (known := versions[agent_id]) is not None:
            known.add(version)
    return [
        Accepted(agent_id, None if found is None else frozenset(found))
        for agent_id, found in versions.items()
    ]


def unknown(save: Save) -> bool:
    """Whether the save does not say which agent produced it."""
    return not save.agent_id or not save.agent_version or UNKNOWN_AGENT in save.producer


def _several(saves: Sequence[Save], where: str) -> ExportError:
    """The refusal to choose between several producers, each with its saves."""
    counts: dict[tuple[str, str], int] = {}
    for save in saves:
        counts[save.producer] = counts.get(save.producer, 0) + 1
    last = max(saves, key=newest_last).producer
    listed = ", ".join(
        f"{agent_id} {version} ({count} save{'' if count == 1 else 's'}"
        f"{', the newest' if (agent_id, version) == last else ''})"
        for (agent_id, version), count in sorted(counts.items())
    )
    return ExportError(
        f"the saves under {where} were produced by several agents: {listed}; a dataset holds "
        "one agent's decisions unless asked: choose with --from AGENT[@VERSION] (or the "
        "option 'agents'), or export every one with --any-agent"
    )


def accept_hint(save: Save, exporter: str | None = None) -> str:
    """How to accept a refused save's producer, with what works for this export: a MAGMA
    exporter (`--agent`, named `exporter`) reads its own agent's saves and takes neither
    `--from` nor the option 'agents', only `--any-agent`."""
    if exporter is not None:
        return (
            f"MAGMA exporter {exporter!r} reads its own agent's saves: accept it with "
            "--any-agent, or export it with a built-in format and "
            f"--from {save.agent_id}@{save.agent_version}"
        )
    return f"accept it with --from {save.agent_id}@{save.agent_version} or the option 'agents'"


def check_producers(
    saves: Sequence[Save],
    accepted: Sequence[Accepted] | None,
    any_producer: bool = False,
    where: str = "the source",
    exporter: str | None = None,
) -> tuple[list[Save], list[Skipped], list[Accepted]]:
    """The compatible saves, the refused ones (with the reason) and what was accepted
    (`any_producer`: every save, each producer accepted). With nothing accepted, the one
    producer of the known ones; several are an error naming them (`where` the source).
    `exporter` names the MAGMA exporter an `--agent` export runs (see `accept_hint`).

    A built-in format told nothing has no agent of its own to compare with, so it refuses
    to guess between several producers: a dataset holds one agent's decisions unless
    asked otherwise, and the newest save may well be a trial of another version. A save
    whose agent never announced its identity is refused unless `any_producer`: nothing
    says what produced it.
    """
    if any_producer:
        found = sorted({save.producer for save in saves})
        return list(saves), [], [Accepted(a, frozenset([v])) for a, v in found]
    policy = list(accepted) if accepted is not None else []
    if accepted is None:
        known = [save for save in saves if not unknown(save)]
        producers = sorted({save.producer for save in known})
        if len(producers) > 1:
            raise _several(known, where)
        policy = [Accepted(a, frozenset([v])) for a, v in producers]
    described = "; ".join(str(item) for item in policy)
    kept: list[Save] = []
    refused: list[Skipped] = []
    for save in saves:
        if not unknown(save) and any(item.admits(save) for item in policy):
            kept.append(save)
            continue
        if unknown(save):
            reason = (
                f"incompatible producer identity/version: agent {save.agent_id!r} "
                f"{save.agent_version!r} is unknown (the agent never announced its identity); "
                "accept it with --any-agent"
            )
        else:
            reason = (
                f"incompatible producer identity/version: agent {save.agent_id} "
                f"{save.agent_version}; this export accepts {described} "
                f"({accept_hint(save, exporter)})"
            )
        refused.append(Skipped(save.name, reason))
    return kept, refused, policy

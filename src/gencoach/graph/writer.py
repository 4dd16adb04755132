"""Writing a run's graph as a MAGMA-GEN 2.0 save folder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from gencoach.errors import SaveError
from gencoach.graph.files import write_atomic, write_json_atomic
from gencoach.protocol import CoachingLog, RunConfig, SituationRecord

CONFIG_FILE = "config.json"
LOGS_DIR = "_coaching_logs"
# gencoach's own: the run's coaching requests as they ended (`gencoach audit` reads them),
# in a folder of its own so that the save's top level holds only MAGMA-GEN's files.
OWN_DIR = "_gencoach"
REQUESTS_FILE = f"{OWN_DIR}/requests.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


_SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}")
# Joins a slug to the hash of the exact id; never found in a name kept as it is.
_HASH_MARK = "~"
# Folders other gencoach commands write beside the saves in an output dir (`gencoach
# export`'s default `SOURCE/datasets/`); a run id equal to one of them, in any case (some
# file systems ignore it), is named like an unsafe id, so no run is saved in one.
RESERVED_FOLDERS = frozenset({"datasets"})


def run_folder_name(run_id: str) -> str:
    """A folder name for a run id, different for different ids.

    An id that is already a safe name (letters, digits, `.`, `_`, `-`, at most 120, not
    hidden) is kept as it is; any other gets a readable slug, `~`, and 12 hex digits of
    the SHA-256 of the exact id (`coll:T` -> `coll_T~3d1f...`), so `coll:T` and `coll/T`
    never share a folder. So does an id naming a folder gencoach writes beside the saves
    (`datasets` -> `datasets~...`).
    """
    if _SAFE_NAME.fullmatch(run_id) and run_id.lower() not in RESERVED_FOLDERS:
        return run_id
    slug = _UNSAFE.sub("_", run_id).strip("._")[:100] or "run"
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:12]
    return f"{slug}{_HASH_MARK}{digest}"


def write_save(
    folder: Path,
    config: RunConfig,
    situations: Iterable[SituationRecord],
    logs: Iterable[CoachingLog] = (),
    requests: object = None,
) -> None:
    """Write `config.json` (incomplete), every situation and log, `requests` (JSON) when
    given, then `config.json` complete.

    A reader that finds `export_complete: true` knows every other file is in place;
    writing the same run again (a run still going, then finished) rewrites it whole.
    """
    if folder.is_symlink():
        raise SaveError(folder, "refusing to save into a symlinked folder")
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / CONFIG_FILE
    draft = config.model_copy(update={"export_complete": False})
    write_json_atomic(config_path, draft.model_dump(mode="json", by_alias=True))
    for situation in situations:
        record = situation.model_dump(mode="json", by_alias=True)
        write_json_atomic(folder / f"{situation.id}.json", record)
    logs_dir = folder / LOGS_DIR
    for index, log in enumerate(logs, start=1):
        if index == 1:
            if logs_dir.is_symlink():
                raise SaveError(logs_dir, "refusing to write logs into a symlinked folder")
            logs_dir.mkdir(exist_ok=True)
        write_atomic(logs_dir / f"{index:06d}_{log.coaching_type}.md", log.content.encode())
    if requests is not None:
        own = folder / OWN_DIR
        if own.is_symlink():
            raise SaveError(own, "refusing to write into a symlinked folder")
        own.mkdir(exist_ok=True)
        write_json_atomic(folder / REQUESTS_FILE, requests)
    final = config.model_copy(update={"export_complete": True})
    write_json_atomic(config_path, final.model_dump(mode="json", by_alias=True))

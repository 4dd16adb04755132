"""`gencoach audit` on the saves of a real demo campaign, as saved and with each invariant
broken by hand: every violation is named, and the command exits 1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gencoach.graph import REQUESTS_FILE
from gencoach.graph.audit import audit
from tests.support.saves import assert_audit_clean

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The saved graphs of one demo campaign (every scenario, one environment each)."""
    out = tmp_path_factory.mktemp("demo")
    demo = subprocess.run(
        [sys.executable, "-m", "gencoach", "demo", "--output", str(out), "--envs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    (graphs,) = out.glob("demo-*/graphs")
    return graphs


def _copy(campaign: Path, tmp_path: Path) -> Path:
    target = tmp_path / "graphs"
    shutil.copytree(campaign, target)
    return target


def _edit_requests(graphs: Path, change: Callable[[dict[str, Any]], bool]) -> str:
    """Apply `change` to the first request, in any save, for which it returns True."""
    for path in sorted(graphs.glob(f"*/{REQUESTS_FILE}")):
        data = json.loads(path.read_text())
        for request in data["requests"]:
            if change(request):
                path.write_text(json.dumps(data))
                return str(request["request_id"])
    raise AssertionError("no request to change")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gencoach", "audit", *args], capture_output=True, text=True
    )


def test_the_campaign_passes_and_the_command_says_what_it_read(campaign: Path) -> None:
    """A demo campaign holds every invariant; the command prints its counts and exits 0."""
    report = assert_audit_clean(campaign)
    assert report.saves == 4
    assert report.proven_attempts > 0
    done = _cli(str(campaign))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("no violation")
    assert done.stdout.startswith("4 saves, ")


def test_a_proof_lost_or_invented_is_named(campaign: Path, tmp_path: Path) -> None:
    """A proven request shown unproven, and an unproven one shown proven, are both named."""
    graphs = _copy(campaign, tmp_path)

    def unprove(request: dict[str, Any]) -> bool:
        if request["state"] != "proven":
            return False
        request["state"] = "unproven"
        return True

    lost = _edit_requests(graphs, unprove)
    messages = [v.message for v in audit([graphs]).violations if v.rule == "proof"]
    assert any(m.startswith(f"request {lost} is unproven, but attempt ") for m in messages), (
        messages
    )
    done = _cli(str(graphs))
    assert done.returncode == 1
    assert f"proof: request {lost} is unproven" in done.stdout


def test_markers_that_disagree_with_their_request_are_named(campaign: Path, tmp_path: Path) -> None:
    """A request whose type no longer matches its coached candidate's marker is named."""
    graphs = _copy(campaign, tmp_path)

    def retype(request: dict[str, Any]) -> bool:
        if not request["attempt_ids"]:
            return False
        request["type_coaching"] = "other:kind"
        return True

    _edit_requests(graphs, retype)
    messages = [v.message for v in audit([graphs]).violations if v.rule == "marker"]
    assert any("its request other:kind" in m for m in messages), messages


def test_a_recovery_not_offered_is_named(campaign: Path, tmp_path: Path) -> None:
    """A failure whose single bad call had its feedback saved, offered replacement alone,
    is named (the demo's campaign offers recovery there)."""
    graphs = _copy(campaign, tmp_path)

    def withhold(request: dict[str, Any]) -> bool:
        if "recovery" not in request["offered_points"]:
            return False
        request["offered_points"] = ["replacement"]
        return True

    request_id = _edit_requests(graphs, withhold)
    messages = [v.message for v in audit([graphs]).violations if v.rule == "recovery"]
    assert any(m.startswith(f"request {request_id} blamed candidate ") for m in messages)


def test_alternatives_beyond_the_budget_are_named(campaign: Path) -> None:
    """Held to a budget of one alternative per place, places holding two are named."""
    violations = [v for v in audit([campaign], max_alternatives=1).violations]
    assert violations
    assert all(v.rule == "alternatives" for v in violations)
    assert "the budget is 1" in violations[0].message


def test_no_save_and_an_unreadable_save_are_told_apart(tmp_path: Path) -> None:
    """An empty folder exits 2 saying no save was found; a save whose situation file is
    missing is a violation of its own."""
    empty = _cli(str(tmp_path))
    assert empty.returncode == 2
    assert "no save found under the paths given" in empty.stderr
    broken = tmp_path / "run"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    done = _cli(str(tmp_path))
    assert done.returncode == 1
    assert f"{broken}: unreadable: " in done.stdout


def test_a_malformed_request_file_is_named_and_the_other_saves_still_checked(
    campaign: Path, tmp_path: Path
) -> None:
    """A `_gencoach/requests.json` that is not JSON is named as unreadable; the campaign's
    other saves are audited all the same."""
    graphs = _copy(campaign, tmp_path)
    first, *others = sorted(graphs.glob(f"*/{REQUESTS_FILE}"))
    first.write_text("{not json")
    report = audit([graphs])
    assert report.saves == 1 + len(others)
    (violation,) = report.violations
    assert violation.rule == "unreadable"
    assert violation.message.startswith(f"{REQUESTS_FILE} is not a request list: ")

"""What agent authors build on, the reference agent, and the conformance checker.

Re-exports, loaded on first use: `create_agent_app` and the `Policy`/`Coach` contracts it
serves, the agent's `Memory`, the coach's corrections and `check_agent` (docs/agents.md
shows a whole agent).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gencoach.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from gencoach.agents.app import create_agent_app
    from gencoach.agents.checker import check_agent, run_check_agent
    from gencoach.agents.checks import CheckResult
    from gencoach.agents.coach import (
        Coach,
        CoachingOutcome,
        point_input,
        replace_decision,
        replace_say,
    )
    from gencoach.agents.memory import (
        Author,
        HistoryEntry,
        Memory,
        coached_decision,
        decision_entry,
        entry_decision,
        instruction_entry,
    )
    from gencoach.agents.policy import Decided, Policy, PolicyError
    from gencoach.agents.sessions import (
        SUPPORTED_BACKEND_TYPE,
        CoachingSession,
        SessionRefusedError,
        SessionStore,
    )
    from gencoach.protocol import COACHING_KEY

# Each name's module, imported on first use: the command line imports this package's
# `cli` module without paying for the web framework the agent app needs.
_MODULES = {
    "Author": "gencoach.agents.memory",
    "COACHING_KEY": "gencoach.protocol",
    "CheckResult": "gencoach.agents.checks",
    "Coach": "gencoach.agents.coach",
    "CoachingOutcome": "gencoach.agents.coach",
    "CoachingSession": "gencoach.agents.sessions",
    "Decided": "gencoach.agents.policy",
    "HistoryEntry": "gencoach.agents.memory",
    "Memory": "gencoach.agents.memory",
    "Policy": "gencoach.agents.policy",
    "PolicyError": "gencoach.agents.policy",
    "SUPPORTED_BACKEND_TYPE": "gencoach.agents.sessions",
    "SessionRefusedError": "gencoach.agents.sessions",
    "SessionStore": "gencoach.agents.sessions",
    "check_agent": "gencoach.agents.checker",
    "coached_decision": "gencoach.agents.memory",
    "create_agent_app": "gencoach.agents.app",
    "decision_entry": "gencoach.agents.memory",
    "entry_decision": "gencoach.agents.memory",
    "instruction_entry": "gencoach.agents.memory",
    "point_input": "gencoach.agents.coach",
    "replace_decision": "gencoach.agents.coach",
    "replace_say": "gencoach.agents.coach",
    "run_check_agent": "gencoach.agents.checker",
}

__getattr__ = lazy_names(__name__, _MODULES)


__all__ = [
    "COACHING_KEY",
    "SUPPORTED_BACKEND_TYPE",
    "Author",
    "CheckResult",
    "Coach",
    "CoachingOutcome",
    "CoachingSession",
    "Decided",
    "HistoryEntry",
    "Memory",
    "Policy",
    "PolicyError",
    "SessionRefusedError",
    "SessionStore",
    "check_agent",
    "coached_decision",
    "create_agent_app",
    "decision_entry",
    "entry_decision",
    "instruction_entry",
    "point_input",
    "replace_decision",
    "replace_say",
    "run_check_agent",
]

"""What agent authors build on, the reference agent, and the conformance checker.

```python
from gencoach.agents import Decided, create_agent_app

class Echo:
    async def decide(self, agent_input, memory, count):
        return [Decided.of(AgentDecision(say=agent_input.instruction.content))] * count

app = create_agent_app(AgentInfo(agent_id="echo", agent_version="1", capabilities={}), Echo())
```
"""

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

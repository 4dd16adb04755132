"""Run any Gymnasium env with discrete actions under gencoach (see docs/integrations.md).

```python
from gencoach.integrations.gymnasium import CampaignOptions, GymAdapter, Tool, run_campaign
```

The agent for any adapter is `gencoach.integrations.gymnasium.agent` (imported apart: it
needs the agent toolkit's web framework).
"""

from gencoach.integrations.gymnasium.adapter import Action, GymAdapter, Tool, Transition
from gencoach.integrations.gymnasium.campaign import CampaignOptions, CampaignReport, run_campaign
from gencoach.integrations.gymnasium.episode import GYM_STATE_KEY, GymEpisode
from gencoach.integrations.gymnasium.teacher import OracleTeacher
from gencoach.sim.branches import until_run_may_end

__all__ = [
    "GYM_STATE_KEY",
    "Action",
    "CampaignOptions",
    "CampaignReport",
    "GymAdapter",
    "GymEpisode",
    "OracleTeacher",
    "Tool",
    "Transition",
    "run_campaign",
    "until_run_may_end",
]

"""Run any Gymnasium env with discrete actions under gencoach (see docs/integrations.md).

```python
from gencoach.integrations.gymnasium import CampaignOptions, GymAdapter, Tool, run_campaign
```
"""

from gencoach.integrations.gymnasium.adapter import GymAdapter, Tool, Transition
from gencoach.integrations.gymnasium.campaign import CampaignOptions, CampaignReport, run_campaign
from gencoach.integrations.gymnasium.episode import GymEpisode
from gencoach.integrations.gymnasium.teacher import OracleTeacher
from gencoach.sim.branches import until_run_may_end

__all__ = [
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

"""Run any Gymnasium env with discrete actions under gencoach (see docs/integrations.md).

Re-exports what an integrator uses: the adapter (`GymAdapter`, `Tool`), the campaign
(`run_campaign`) and the oracle teacher. The agent for any adapter is
`gencoach.integrations.gymnasium.agent` (imported apart: it needs a web framework).
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

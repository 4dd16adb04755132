"""gencoach: asynchronous coaching orchestration for agent data generation.

The curated namespace integrators import from: the reporters and branch orders, the
Gymnasium adapter, the agent toolkit, saves, exports and the trajectory library, and the
errors they may catch. Each name is imported on first use (`_MODULES` says from where).
"""

from typing import TYPE_CHECKING

from gencoach.__about__ import __version__
from gencoach.runtime.lazy import lazy_names

_MODULES = {
    "Reporter": "gencoach.reporting.client",
    "AsyncReporter": "gencoach.reporting.client",
    "ReportError": "gencoach.reporting.client",
    "OrderReader": "gencoach.reporting.orders",
    "BranchOrder": "gencoach.protocol.branches",
    "GymAdapter": "gencoach.integrations.gymnasium",
    "Tool": "gencoach.integrations.gymnasium",
    "OracleTeacher": "gencoach.integrations.gymnasium",
    "run_campaign": "gencoach.integrations.gymnasium",
    "CampaignOptions": "gencoach.integrations.gymnasium",
    "env_app": "gencoach.integrations.gymnasium.agent",
    "EnvAgentOptions": "gencoach.integrations.gymnasium.agent",
    "create_agent_app": "gencoach.agents",
    "Policy": "gencoach.agents",
    "Coach": "gencoach.agents",
    "check_agent": "gencoach.agents",
    "read_save": "gencoach.graph",
    "SavedGraph": "gencoach.graph",
    "audit": "gencoach.graph.audit",
    "run_export": "gencoach.export",
    "Exporter": "gencoach.export",
    "CanonicalDatasetAdapter": "gencoach.library",
    "GencoachError": "gencoach.errors",
    "ContractError": "gencoach.errors",
    "SaveError": "gencoach.errors",
}

if TYPE_CHECKING:  # the same names, seen by type checkers as they are
    from gencoach.agents import Coach, Policy, check_agent, create_agent_app
    from gencoach.errors import ContractError, GencoachError, SaveError
    from gencoach.export import Exporter, run_export
    from gencoach.graph import SavedGraph, read_save
    from gencoach.graph.audit import audit
    from gencoach.integrations.gymnasium import (
        CampaignOptions,
        GymAdapter,
        OracleTeacher,
        Tool,
        run_campaign,
    )
    from gencoach.integrations.gymnasium.agent import EnvAgentOptions, env_app
    from gencoach.library import CanonicalDatasetAdapter
    from gencoach.protocol.branches import BranchOrder
    from gencoach.reporting.client import AsyncReporter, Reporter, ReportError
    from gencoach.reporting.orders import OrderReader

__getattr__ = lazy_names(__name__, _MODULES)

__all__ = [
    "AsyncReporter",
    "BranchOrder",
    "CampaignOptions",
    "CanonicalDatasetAdapter",
    "Coach",
    "ContractError",
    "EnvAgentOptions",
    "Exporter",
    "GencoachError",
    "GymAdapter",
    "OracleTeacher",
    "OrderReader",
    "Policy",
    "ReportError",
    "Reporter",
    "SaveError",
    "SavedGraph",
    "Tool",
    "__version__",
    "audit",
    "check_agent",
    "create_agent_app",
    "env_app",
    "read_save",
    "run_campaign",
    "run_export",
]

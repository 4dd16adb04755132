"""The reference simulator's deterministic core: world, tools, scenarios and stages."""

from gencoach.sim.decisions import Decision, ToolCall, parse_decision
from gencoach.sim.episode import Episode, EpisodeOverError, EpisodeState, StepResult
from gencoach.sim.feedback import env_feedback
from gencoach.sim.goals import Answer, Holding, ObjectsIn, PressSequence, Progress, Verdict
from gencoach.sim.injection import INJECTION_MESSAGE, ActiveError, Injection
from gencoach.sim.plans import Plan
from gencoach.sim.scenarios import SCENARIOS, Scenario, Task, get_scenario
from gencoach.sim.stages import Outcome, Stage, StageEnd
from gencoach.sim.tools import TOOLS, ToolResult, ToolSpec, execute, feedback_text, tool_specs
from gencoach.sim.tracker import StageTracker, TrackerState
from gencoach.sim.world import Button, Obj, Place, Robot, World, tabletop

__all__ = [
    "INJECTION_MESSAGE",
    "SCENARIOS",
    "TOOLS",
    "ActiveError",
    "Answer",
    "Button",
    "Decision",
    "Episode",
    "EpisodeOverError",
    "EpisodeState",
    "Holding",
    "Injection",
    "Obj",
    "ObjectsIn",
    "Outcome",
    "Place",
    "Plan",
    "PressSequence",
    "Progress",
    "Robot",
    "Scenario",
    "Stage",
    "StageEnd",
    "StageTracker",
    "StepResult",
    "Task",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "TrackerState",
    "Verdict",
    "World",
    "env_feedback",
    "execute",
    "feedback_text",
    "get_scenario",
    "parse_decision",
    "tabletop",
    "tool_specs",
]

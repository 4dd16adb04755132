"""The reference simulator's deterministic core: world, tools, scenarios and stages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gencoach.runtime.lazy import lazy_names

if TYPE_CHECKING:
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

# Each name's module, imported on first use: the command line reads the scenarios'
# names without importing the world.
_MODULES = {
    "ActiveError": "gencoach.sim.injection",
    "Answer": "gencoach.sim.goals",
    "Button": "gencoach.sim.world",
    "Decision": "gencoach.sim.decisions",
    "Episode": "gencoach.sim.episode",
    "EpisodeOverError": "gencoach.sim.episode",
    "EpisodeState": "gencoach.sim.episode",
    "Holding": "gencoach.sim.goals",
    "INJECTION_MESSAGE": "gencoach.sim.injection",
    "Injection": "gencoach.sim.injection",
    "Obj": "gencoach.sim.world",
    "ObjectsIn": "gencoach.sim.goals",
    "Outcome": "gencoach.sim.stages",
    "Place": "gencoach.sim.world",
    "Plan": "gencoach.sim.plans",
    "PressSequence": "gencoach.sim.goals",
    "Progress": "gencoach.sim.goals",
    "Robot": "gencoach.sim.world",
    "SCENARIOS": "gencoach.sim.scenarios",
    "Scenario": "gencoach.sim.scenarios",
    "Stage": "gencoach.sim.stages",
    "StageEnd": "gencoach.sim.stages",
    "StageTracker": "gencoach.sim.tracker",
    "StepResult": "gencoach.sim.episode",
    "TOOLS": "gencoach.sim.tools",
    "Task": "gencoach.sim.scenarios",
    "ToolCall": "gencoach.sim.decisions",
    "ToolResult": "gencoach.sim.tools",
    "ToolSpec": "gencoach.sim.tools",
    "TrackerState": "gencoach.sim.tracker",
    "Verdict": "gencoach.sim.goals",
    "World": "gencoach.sim.world",
    "env_feedback": "gencoach.sim.feedback",
    "execute": "gencoach.sim.tools",
    "feedback_text": "gencoach.sim.tools",
    "get_scenario": "gencoach.sim.scenarios",
    "parse_decision": "gencoach.sim.decisions",
    "tabletop": "gencoach.sim.world",
    "tool_specs": "gencoach.sim.tools",
}

__getattr__ = lazy_names(__name__, _MODULES)

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

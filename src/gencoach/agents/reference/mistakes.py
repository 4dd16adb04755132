"""The realistic mistakes the scripted policy makes, each at its own configurable rate.

`MistakeRates` holds the rates (its docstring says what each mistake answers);
`mistaken_decision` makes one, `right_decision` is the plan's next step without one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from typing import Literal, get_args

from gencoach.agents.reference.tasks import Situation
from gencoach.protocol import AgentDecision, ToolCall
from gencoach.sim import Plan
from gencoach.sim import ToolCall as SimCall
from gencoach.sim.tools import CANCEL

Mistake = Literal["wrong_argument", "skipped_prerequisite", "malformed", "detour", "no_action"]
MISTAKES: tuple[Mistake, ...] = get_args(Mistake)
# What an LLM plausibly calls a tool when it misremembers the name.
_MISNAMED = {"press_button": "press", "take_obj": "grab", "depose": "put_down", CANCEL: "cancel"}
STALLING = "Let me look at the table first."


@dataclass(frozen=True)
class MistakeRates:
    """The probability of each mistake per candidate, each in [0, 1].

    | mistake                | what the agent answers                                         |
    | ---------------------- | -------------------------------------------------------------- |
    | `wrong_argument`       | the right tool with a wrong id (button, object, place, colour) |
    | `skipped_prerequisite` | a later call of the plan without the one it needs first        |
    | `malformed`            | words and tool calls together, or a call to an unknown tool    |
    | `detour`               | a needless `cancel_current_action` (once per stage)            |
    | `no_action`            | words without any tool call                                    |

    A mistake that cannot apply in a situation (no prerequisite to skip, a detour already
    made) is not made: the right decision is answered instead.
    """

    wrong_argument: float = 0.0
    skipped_prerequisite: float = 0.0
    malformed: float = 0.0
    detour: float = 0.0
    no_action: float = 0.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"mistake rate {item.name} must be within [0, 1], got {value!r}")

    def draw(self, rng: random.Random) -> Mistake | None:
        """The mistake to make, if any: each kind is drawn in turn, the first hit wins."""
        chosen: Mistake | None = None
        for kind in MISTAKES:
            hit = rng.random() < getattr(self, kind)  # always draw, so streams stay aligned
            if hit and chosen is None:
                chosen = kind
        return chosen


def _call(call: SimCall) -> ToolCall:
    return ToolCall(
        name=call.name, arguments=call.arguments, target_robot_name=call.target_robot_name
    )


def right_decision(plan: Plan) -> AgentDecision:
    """The plan's next step as a decision: its first call, or its answer."""
    if plan.tool_calls:
        return AgentDecision(tool_calls=[_call(plan.tool_calls[0])])
    return AgentDecision(say=plan.say or "Done.")


def _wrong_argument(situation: Situation, plan: Plan, rng: random.Random) -> AgentDecision | None:
    world = situation.world
    if not plan.tool_calls:
        colours = sorted(({o.colour for o in world.objects.values()} | {"green"}) - {plan.say})
        return AgentDecision(say=rng.choice(colours))
    call = plan.tool_calls[0]
    choices = {
        "press_button": ("id", list(world.buttons)),
        "take_obj": ("obj", list(world.objects)),
        "depose": ("target", [p.id for p in world.places.values() if p.kind == "bin"]),
    }
    if call.name not in choices:
        return None
    param, candidates = choices[call.name]
    others = [value for value in candidates if value != call.arguments.get(param)]
    if call.name == "depose" and not others:
        others = [p for p in world.places if p != call.arguments.get(param)]
    if not others:
        return None
    wrong = call.model_copy(update={"arguments": {**call.arguments, param: rng.choice(others)}})
    return AgentDecision(tool_calls=[_call(wrong)])


def _skipped_prerequisite(situation: Situation, plan: Plan) -> AgentDecision | None:
    calls = plan.tool_calls
    later = [call for call in calls[1:] if call != calls[0]] if calls else []
    if later:
        return AgentDecision(tool_calls=[_call(later[0])])
    if calls and calls[0].name == "depose":
        empty = [r.name for r in situation.world.robots.values() if r.holding is None]
        if empty:  # deposing with a robot that never took the object
            return AgentDecision(
                tool_calls=[_call(calls[0].model_copy(update={"target_robot_name": empty[0]}))]
            )
    return None


def _malformed(situation: Situation, plan: Plan, rng: random.Random) -> AgentDecision:
    robot = next(iter(situation.world.robots))
    if not plan.tool_calls:
        cancel = ToolCall(name=CANCEL, arguments={}, target_robot_name=robot)
        return AgentDecision(say=plan.say, tool_calls=[cancel])
    call = _call(plan.tool_calls[0])
    if rng.random() < 0.5:
        return AgentDecision(say=f"I will call {call.name} now.", tool_calls=[call])
    misnamed = call.model_copy(update={"name": _MISNAMED.get(call.name, f"do_{call.name}")})
    return AgentDecision(tool_calls=[misnamed])


def mistaken_decision(
    kind: Mistake, situation: Situation, plan: Plan, rng: random.Random
) -> AgentDecision | None:
    """The decision with this mistake, or None when it cannot be made here."""
    if kind == "wrong_argument":
        return _wrong_argument(situation, plan, rng)
    if kind == "skipped_prerequisite":
        return _skipped_prerequisite(situation, plan)
    if kind == "malformed":
        return _malformed(situation, plan, rng)
    if kind == "detour":
        if situation.text_only or situation.detoured:
            return None
        robot = next(iter(situation.world.robots))
        return AgentDecision(
            tool_calls=[ToolCall(name=CANCEL, arguments={}, target_robot_name=robot)]
        )
    return AgentDecision(say=STALLING)

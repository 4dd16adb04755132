"""The checks of `gencoach check-agent`, one function per protocol rule an agent must keep."""

from gencoach.agents.checks.results import CheckResult

__all__ = ["CheckResult"]

"""The BabyAI oracle teacher: `endpoint: gencoach.integrations.minigrid:teacher`."""

from __future__ import annotations

from gencoach.integrations.gymnasium import OracleTeacher
from gencoach.integrations.minigrid.adapter import BabyAIAdapter

teacher = OracleTeacher(BabyAIAdapter)
"""A `type: python` backend diagnosing BabyAI runs with the BabyAI bot."""

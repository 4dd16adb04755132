"""A text env under gencoach: tools with arguments, text observations, a call-answering oracle.

Needs the `gym` extra (gymnasium). `gencoach sim gym gencoach.integrations.textrooms:rooms`
plays it; `teacher` is its oracle teacher (`type: python`, endpoint
`gencoach.integrations.textrooms:teacher`).
"""

from gencoach.integrations.gymnasium import OracleTeacher
from gencoach.integrations.textrooms.adapter import ROOM_TOOLS, TextRoomsAdapter, rooms
from gencoach.integrations.textrooms.env import TextRoomsEnv

teacher = OracleTeacher(TextRoomsAdapter)
"""A `type: python` backend diagnosing text-rooms runs with the adapter's oracle."""

__all__ = ["ROOM_TOOLS", "TextRoomsAdapter", "TextRoomsEnv", "rooms", "teacher"]

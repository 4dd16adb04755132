"""Helpers shared by the test suites: Redis servers, processes, loopback peers, saves and
runs to feed them, and readers of what gencoach wrote. A test module imports its helpers
from here (or from its own folder's helper modules), never from another test module."""

"""Helpers shared by the test suite: Redis servers, processes, loopback peers."""

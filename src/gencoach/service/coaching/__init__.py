"""Coaching requests: their state machine, routing, admission and each run's lane."""

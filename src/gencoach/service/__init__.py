"""The controller daemon: intake, graph state, persistence and the HTTP API."""

"""Serving an agent app (reference, env agent) with uvicorn until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from gencoach.agents.reference.agent import ReferenceOptions, reference_app
from gencoach.runtime.logs import get_logger

log = get_logger("agents.serve")
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def serve_agent(host: str, port: int, options: ReferenceOptions) -> None:
    """Serve the reference agent; blocks, and returns once a signal stopped it gracefully."""
    serve_app(reference_app(options), host, port, policy=options.policy, seed=options.seed)


def serve_app(app: FastAPI, host: str, port: int, **described: Any) -> None:
    """Serve an agent app, logging `described` with its URL; blocks, and returns once a
    signal stopped it gracefully.

    On SIGINT or SIGTERM uvicorn stops accepting connections and lets requests in flight
    finish; it then raises the signal again, which is swallowed here so that the command
    exits 0 after a requested stop.
    """
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    received: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, remember) for sig in _STOP_SIGNALS} if in_main else {}
    log.info("agent.serving", url=f"http://{host}:{port}", **described)
    try:
        server.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("agent.stopped", signal=signal.Signals(received[0]).name if received else None)

"""One TLS context per worker process, made once, before any job runs.

Building an httpx client builds an SSL context (reading the CA bundle), about 0.1 s.
The worker process makes the context once; the async worker's shared clients and a
forking worker's work-horses (which inherit it) all use it.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """The process's TLS context for outgoing HTTPS (certificates verified)."""
    return httpx.create_ssl_context()

"""An agent that accepts connections on loopback and never answers: a hung process."""

from __future__ import annotations

import socket
import threading


class HangingAgent:
    """A TCP server on loopback that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.held: list[socket.socket] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where the agent seems to be."""
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stopped:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        """Drop every connection and stop listening."""
        self._stopped = True
        self.server.close()
        for connection in self.held:
            connection.close()

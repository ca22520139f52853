"""Serve an ASGI app with uvicorn in a background thread on a loopback port.

Used by the fake vLLM server (``fake_vllm.harness``) and the scripted demo hint
constructor (``fake_vllm.hints``)::

    srv = ThreadedUvicorn(app, label="demo hint server", thread_name="demo-hints").start()   # port 0 = a free one
    srv.port
    srv.stop()

No Textual import; uvicorn is imported when a server starts.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


def free_loopback_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 = a free one the OS picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class ThreadedUvicorn:
    """One uvicorn server on its own daemon thread; ``start()`` waits until it serves.

    ``config`` is passed to ``uvicorn.Config`` on top of the defaults (no access log,
    no lifespan, a one-second graceful shutdown). ``label`` names the server in the
    start error; ``thread_name`` names the thread (``{port}`` is filled in).
    """

    def __init__(self, app: Any, *, label: str, thread_name: str, host: str = "127.0.0.1", port: int = 0,
                 log_level: str = "critical", start_timeout: float = 10.0, **config: Any) -> None:
        self.app = app
        self.label = label
        self.thread_name = thread_name
        self.host = host
        self.port = port
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.config = config
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    def start(self) -> "ThreadedUvicorn":
        import uvicorn  # lazy: uvicorn loads only when a server starts (importing this module for its socket helper stays cheap)

        self._sock = free_loopback_socket(self.host, self.port)
        self.port = self._sock.getsockname()[1]
        ucfg = uvicorn.Config(
            self.app, log_level=self.log_level, access_log=False, lifespan="off",
            timeout_graceful_shutdown=1, **self.config,
        )
        self._server = uvicorn.Server(ucfg)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name=self.thread_name.format(port=self.port), daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.label} failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Ask the server to exit, force it after five seconds, close the socket. Idempotent."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout=5)
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._server = self._thread = self._sock = None

"""A TelemetryServer running its own event loop in a thread, for the tests that talk to it over sockets."""

from __future__ import annotations

import asyncio
import threading
import time


class ServerThread:
    """Starts ``server`` (a :class:`kip714.endpoint.server.TelemetryServer`) in a daemon thread; ``stop()`` closes it."""

    def __init__(self, server, stop_timeout: float = 30.0, call_timeout: float = 10.0, loop_factory=None) -> None:
        self.server = server
        self.stop_timeout = stop_timeout
        self.call_timeout = call_timeout
        self.loop = (loop_factory or asyncio.new_event_loop)()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(server.start())
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10), "server did not start"

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def call(self, fn):
        """``fn()`` run on the server's loop (to read its state without racing it)."""

        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(self.call_timeout)

    def wait_for(self, predicate, timeout: float = 8.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(self.stop_timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

"""A receiver that hands accepted pushes to a worker thread through a bounded queue: :class:`BoundedQueueReceiver`.

Every receiver that does slow work (decoding, HTTP, another receiver) is built on it: the Prometheus
exporter, the OTLP forwarder and :class:`~kip714.broker.receivers.BackgroundReceiver`. The request path
only appends to a queue; a worker thread takes batches from it.

**The full-queue policy** (one for all of them): a payload that finds the queue full is dropped and counted
under ``queue-full`` in :attr:`~BoundedQueueReceiver.payloads_dropped`; the push is still answered as
accepted. The log says it once per episode: when the queue starts dropping, and, with the count, when it
takes payloads again (or closes). The push is never refused: KIP-714 says a client answered
INVALID_RECORD "should log an error and stop pushing metrics", so refusing a push because kip714's own
queue is full would switch that client's telemetry off until it restarts, for a condition that is the
collector's and usually lasts seconds. A dropped push costs one interval of that client's data (its
cumulative sums lose nothing: the next push carries them), and it is counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

__all__ = [
    "BoundedQueueReceiver",
    "QUEUE_FULL",
]

#: The reason a payload dropped for a full queue is counted under.
QUEUE_FULL = "queue-full"


class BoundedQueueReceiver:
    """A :class:`~kip714.TelemetryReceiver` whose ``export_metrics`` appends to a bounded queue (never
    blocks, never raises) and whose worker thread calls :meth:`_process` with batches of queued items.

    A subclass defines :meth:`_item` (what to queue for a push; keep it cheap: it runs on the request
    path) and :meth:`_process` (the slow work, on the worker); optionally :meth:`_take` (how a batch is
    taken), :meth:`_tick` (periodic work on the worker) and :meth:`_stopping`. It calls
    ``super().__init__`` last: that starts the worker.

    ``max_queue``: items waiting at most; a full queue drops the payload (the module docstring's policy).
    ``batch``: items per :meth:`_process` call at most. ``linger_s``: how long the worker, woken by a push,
    waits for more before it takes a batch smaller than ``batch`` (0: it takes what is there at once); a
    full batch, :meth:`flush` and :meth:`close` end the wait. Work with a fixed cost per call (a decode,
    an HTTP request) is then paid per batch rather than per push when pushes arrive at a high rate, for at
    most ``linger_s`` more delay. ``background=False`` processes each push in the caller instead (tests,
    tools). Counters: :attr:`payloads_dropped` (payloads not processed, by reason:
    ``queue-full``, ``shutdown`` for what :meth:`close` could not process, ``internal-error`` when
    :meth:`_process` raised, and the subclass's own), :attr:`queue_depth`."""

    #: Names the queue in the log and in ``kip714_queue_depth{queue}``.
    queue_name = "receiver"
    #: How the full-queue log line names the counter.
    dropped_metric = 'payloads_dropped["queue-full"]'
    log = logging.getLogger("kip714.broker")

    def __init__(
        self,
        max_queue: int = 10_000,
        batch: int = 256,
        background: bool = True,
        thread_name: str = "kip714-queue",
        linger_s: float = 0.0,
    ) -> None:
        self.max_queue = int(max_queue)
        self.batch = max(1, int(batch))
        self.linger_s = max(0.0, float(linger_s))
        self._batch_ready = threading.Event()  # ends a linger: a full batch queued, a flush, a close
        #: Payloads not processed, by reason (read it with :meth:`dropped_counts` from another thread).
        self.payloads_dropped: dict[str, int] = {}
        # items are what :meth:`_item` makes: each subclass chooses their type (``Any`` here)
        self._queue: deque[Any] = deque()
        # one lock for the queue and the drop counters: the request path appends and counts from many
        # threads; the worker holds it only to take a batch (never while processing)
        self._queue_lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()  # set: nothing queued and nothing being processed
        self._idle.set()
        self._closed = False
        self._full: list[float] | None = None  # while dropping for a full queue: [payloads dropped, since]
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ for subclasses

    def _item(self, context: Any, payload: Any) -> Any:
        """What to queue for an accepted push (runs on the request path)."""
        return (context, payload)

    def _process(self, items: list[Any]) -> None:
        """Process a batch of queued items (on the worker; an exception counts them as ``internal-error``)."""
        raise NotImplementedError

    def _take(self) -> list[Any]:
        """Take the next batch off the queue: at least one item (called with the queue lock held; the queue
        is not empty)."""
        q = self._queue
        return [q.popleft() for _ in range(min(self.batch, len(q)))]

    def _tick(self) -> None:
        """Periodic work on the worker thread: called after every wake-up (a push, or half a second)."""

    def _stopping(self) -> None:
        """Called by :meth:`close` once no more work will be started, before it waits for the worker."""

    # ------------------------------------------------------------------ request path

    def export_metrics(self, context: Any, payload: Any) -> None:
        """Queue an accepted push. Never blocks and never raises for a full queue: the payload is dropped
        and counted (``queue-full``), and the start and end of such an episode are logged once each."""
        item = self._item(context, payload)
        if self._thread is None:
            self._process([item])
            return
        self._enqueue(item)

    def export_many(self, items: list[tuple[Any, Any]]) -> None:
        """Queue the accepted pushes of one read (``(context, payload)`` pairs, in order): what
        :meth:`export_metrics` does for each, under one hold of the queue lock while there is room."""
        self._enqueue_many([self._item(context, payload) for context, payload in items])

    def _enqueue_many(self, made: list[Any]) -> None:
        """Queue the items of one read's pushes (what :meth:`_item` makes, or a subclass's ``export_batch``), in
        order: under one hold of the queue lock while there is room, else item by item (the full-queue policy)."""
        if self._thread is None:
            self._process(made)
            return
        with self._queue_lock:
            queue = self._queue
            if self._full is None and len(queue) + len(made) <= self.max_queue:
                queue.extend(made)
                if self._idle.is_set():
                    self._idle.clear()
                if len(queue) >= self.batch and self.linger_s:
                    self._batch_ready.set()
                if not self._wake.is_set():
                    self._wake.set()
                return
        for item in made:  # a full queue: its policy, item by item
            self._enqueue(item)

    def _enqueue(self, item: Any) -> None:
        ended = None
        with self._queue_lock:
            if len(self._queue) >= self.max_queue:
                dropped = self.payloads_dropped
                dropped[QUEUE_FULL] = dropped.get(QUEUE_FULL, 0) + 1
                if self._full is not None:
                    self._full[0] += 1
                    return
                self._full = [1, time.monotonic()]
            else:
                self._queue.append(item)
                if self._idle.is_set():  # (set and cleared only under this lock)
                    self._idle.clear()
                if len(self._queue) == self.batch and self.linger_s:
                    self._batch_ready.set()
                if self._full is None:
                    if not self._wake.is_set():  # the worker clears it before it drains the queue
                        self._wake.set()
                    return
                ended, self._full = self._full, None
        if ended is None:
            self.log.warning(
                "%s queue is full (%d payloads): dropping accepted payloads, counted as %s; "
                "the pushes are still answered (the end of this is logged with the count)",
                self.queue_name,
                self.max_queue,
                self.dropped_metric,
            )
            return
        self._wake.set()
        self._said_full_end(ended)

    def _said_full_end(self, episode: list[float], how: str = "takes payloads again") -> None:
        self.log.warning(
            "%s queue %s: %d dropped while it was full for %.1f s",
            self.queue_name,
            how,
            episode[0],
            time.monotonic() - episode[1],
        )

    def _drop(self, reason: str, n: int = 1) -> None:
        """Count ``n`` payloads not processed under ``reason`` (thread-safe)."""
        with self._queue_lock:
            self.payloads_dropped[reason] = self.payloads_dropped.get(reason, 0) + n

    def dropped_counts(self) -> dict[str, int]:
        """A copy of :attr:`payloads_dropped`, taken under its lock."""
        with self._queue_lock:
            return dict(self.payloads_dropped)

    @property
    def queue_depth(self) -> int:
        """Items waiting in the queue."""
        return len(self._queue)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            self._wake.wait(0.5)
            self._wake.clear()
            if self.linger_s and not self._closed and 0 < len(self._queue) < self.batch:
                self._batch_ready.wait(self.linger_s)
            self._batch_ready.clear()
            while True:
                with self._queue_lock:
                    if not self._queue:
                        self._idle.set()
                        break
                    items = self._take()
                try:
                    self._process(items)
                except Exception:  # a bug must not stop the worker; the payloads are counted
                    self.log.exception("%s failed on %d queued payloads", self.queue_name, len(items))
                    self._drop("internal-error", len(items))
            if self._closed:
                return
            try:
                self._tick()
            except Exception:
                self.log.exception("%s periodic work failed", self.queue_name)

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything queued so far was processed (True), or ``timeout`` seconds passed (None:
        no limit)."""
        if self._thread is None:
            return True
        self._batch_ready.set()
        return self._idle.wait(timeout)

    def close(self, timeout: float | None = 5.0) -> None:
        """Process what is queued (for up to ``timeout`` seconds), stop the worker; what is still queued
        then is dropped and counted as ``shutdown``."""
        self.flush(timeout)
        self._closed = True
        self._stopping()
        self._batch_ready.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._queue_lock:
            left = len(self._queue)
            self._queue.clear()
            if left:
                self.payloads_dropped["shutdown"] = self.payloads_dropped.get("shutdown", 0) + left
            ended, self._full = self._full, None
            if self._thread is None or not self._thread.is_alive():
                self._idle.set()
        if ended is not None:
            self._said_full_end(ended, "closed")

"""The admin API's CLIENT_METRICS state shared by a fleet of replicas: a compacted topic of the cluster
(``kip714 proxy --state-topic NAME``), read and written through librdkafka (the ``fleet`` extra).

Kafka keeps client-metrics configs in the cluster's metadata, so every broker computes the same
SubscriptionId for a client. A fleet of proxies does the same with one compacted topic, as Kafka Connect keeps
its configs and Schema Registry its schemas:

* **One record per subscription name.** The key is the name; the value is JSON (``{"format": 1, "config":
  {...}, "replica": "r1"}``); ``"config": null`` hides a subscription a file or a flag defines; a deletion of
  anything else is a tombstone (a null value), which compaction removes in time. One partition, so the
  topic's order is every replica's order.
* **Every replica reads it from the beginning at start-up, then follows it** (``fetch.wait.max.ms`` 10 ms: a
  record is applied elsewhere about 11 ms after it is written; librdkafka's default of 500 ms would miss a
  100 ms median).
* **An alter is answered once its record is acknowledged by every in-sync replica (``acks=all``) and this
  replica has read it back**, so a describe through the same replica sees it at once.
* **Concurrent alters of one name: the topic's order decides.** Each record names, in its ``kip714-base``
  header, the offset of the record of that name it was computed from (-1: none). A replica applies a record
  only when that base is not older than the record it holds for the name; a record computed from a stale copy
  is ignored everywhere, and its writer, reading it back ignored, computes the alter again from the state in
  force and writes it once more. So two incremental alters of different keys of one name, sent at once to two
  replicas, both survive. (A base newer than the record held is one that compaction removed: it was applied.)
* **A record that does not parse** is logged once, counted (``skipped``) and ignored: another replica's
  record never stops this one.

:class:`StateTopicStore` has the interface of :class:`~kip714.broker.admin_state.AdminStateStore` that
:class:`~kip714.broker.subscription_layers.SubscriptionLayers` uses (``load``, ``write``, ``follow``, ``close``),
so the admin API does not know which store it has.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._enums import ErrorCode
from .._extras import require
from ..errors import InvalidConfigError, StateUnavailableError
from .admin_state import ABSENT, AdminStateStore, StateDict

__all__ = ["BASE_HEADER", "StateTopicStore"]

log = logging.getLogger("kip714.state_topic")

#: The record header that names the offset the record was computed from.
BASE_HEADER = "kip714-base"
_FORMAT = 1
#: How long an alter may wait for its record's acknowledgement and read-back before it fails.
WRITE_TIMEOUT_S = 5.0
#: How often the follower asks the partition's leader for the end offset (the lag, and whether it answers).
PROBE_INTERVAL_S = 1.0


def _config_of(value: bytes) -> dict[str, str] | None:
    """A record's value -> the config (None: a hiding deletion); ValueError when it is not a state record."""
    data = json.loads(value)
    if not isinstance(data, dict) or data.get("format") != _FORMAT or "config" not in data:
        raise ValueError(f"not a kip714 state record of format {_FORMAT}")
    cfg = data["config"]
    if cfg is None:
        return None
    if not isinstance(cfg, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.items()):
        raise ValueError("config is neither null nor an object of strings")
    return dict(cfg)


def _base_of(headers: list[tuple[str, bytes]] | None) -> int | None:
    for key, value in headers or ():
        if key == BASE_HEADER:
            return int(value.decode("ascii"))
    return None


class StateTopicStore:
    """The CLIENT_METRICS state in the compacted topic ``topic`` of the cluster at ``bootstrap`` (see the
    module docstring). ``client``: librdkafka properties of the connection (security, SASL, TLS);
    ``replication_factor``: the topic's when kip714 creates it; ``cache``: a state folder that keeps the last
    state read, served when the cluster does not answer at start-up; ``connect_timeout_s``: how long start-up
    waits for the cluster."""

    def __init__(
        self,
        topic: str,
        bootstrap: str,
        *,
        replica_id: str = "",
        client: Mapping[str, str] | None = None,
        replication_factor: int = 3,
        cache: AdminStateStore | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        require("fleet", "--state-topic")
        self.topic = topic
        self.path = f"state topic {topic}"  # where the state lives, for messages
        self.replica_id = replica_id
        self.replication_factor = replication_factor
        self.cache = cache
        self.connect_timeout_s = connect_timeout_s
        self._client = {"bootstrap.servers": bootstrap, **dict(client or {})}
        self._cond = threading.Condition()
        self._state: StateDict = {}
        self._versions: dict[str, int] = {}
        self._position = 0  # the next offset to read
        self._end = -1  # the partition's end offset at the last probe (-1: never answered)
        self._caught_up = False
        self._reachable = False
        self._why = "not started"
        self._outcomes: dict[int, bool] = {}  # offset -> applied?, kept while this replica writes
        self._writers = 0  # writes in flight (their records may be read back before their delivery report)
        self.skipped = 0  # records that did not parse
        self.applied = 0  # records applied
        self.stale = 0  # records computed from a stale copy (ignored)
        self._warned_skip = False
        self._on_change: Callable[[StateDict], None] | None = None
        self._lock: Any = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._producer: Any = None

    # ------------------------------------------------------------------------------ start-up

    def load(self) -> StateDict:
        """Connect, check (or create) the topic and read it to its end; the state it holds. When the cluster
        does not answer within ``connect_timeout_s``: the cache's state (empty without one), and the replica
        catches up in the background (``ready`` stays False until then). A topic kip714 cannot use (more than
        one partition, creation refused) is an :class:`~kip714.errors.InvalidConfigError` naming what is
        needed."""
        from confluent_kafka import Consumer, Producer

        common = {
            **self._client,
            "client.id": f"kip714-state-{self.replica_id or 'proxy'}",
            "logger": logging.getLogger("kip714.state_topic.librdkafka"),
        }
        self._consumer = Consumer(
            {
                **common,
                "group.id": f"kip714-state-{self.replica_id or 'proxy'}",  # never joined: assign() only
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
                "fetch.error.backoff.ms": 50,
                "reconnect.backoff.max.ms": 1000,
                "error_cb": self._on_error,
            }
        )
        self._producer = Producer(
            {
                **common,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": int(WRITE_TIMEOUT_S * 1000),
                "reconnect.backoff.max.ms": 1000,
                "error_cb": self._on_error,
            }
        )
        deadline = time.monotonic() + self.connect_timeout_s
        if self._prepare(deadline):
            self._catch_up(deadline)
        if not self._caught_up:
            state = self.cache.load() if self.cache is not None else {}
            log.warning(
                "event=state_topic_unreachable topic=%s serving=%s (%s; /readyz fails until it has caught up)",
                self.topic,
                "the cached state" if self.cache is not None else "no admin state",
                self._why,
            )
            # the topic's records are read into their own state; it replaces the cached one, whole, once caught up
            return dict(state)
        with self._cond:
            return dict(self._state)

    def _prepare(self, deadline: float) -> bool:
        """Find the topic in the metadata (creating it when missing) and assign its partition; False when the
        cluster did not answer in time."""
        while time.monotonic() < deadline:
            try:
                md = self._consumer.list_topics(self.topic, timeout=max(0.1, min(2.0, deadline - time.monotonic())))
            except Exception as exc:  # KafkaException: no broker answered in time
                self._why = f"the cluster does not answer ({_reason(exc)})"
                continue
            self._reachable = True
            meta = md.topics.get(self.topic)
            if meta is None or (meta.error is not None and meta.error.code() == _UNKNOWN_TOPIC):
                self._create()
                continue
            if meta.error is not None:
                raise InvalidConfigError(
                    f"--state-topic {self.topic}: the cluster refuses it ({meta.error.name()}): grant this "
                    f"proxy's principal DESCRIBE, READ and WRITE on Topic:{self.topic}"
                )
            if len(meta.partitions) != 1:
                raise InvalidConfigError(
                    f"--state-topic {self.topic}: the topic has {len(meta.partitions)} partitions; kip714 keeps "
                    "its state in one (the order of one partition is every replica's order): create it with "
                    "--partitions 1 --config cleanup.policy=compact, or name another topic"
                )
            self._assign()
            return True
        return False

    def _create(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(dict(self._client))
        future = admin.create_topics(
            [
                NewTopic(
                    self.topic,
                    num_partitions=1,
                    replication_factor=self.replication_factor,
                    config={"cleanup.policy": "compact"},
                )
            ],
            operation_timeout=min(5.0, self.connect_timeout_s),
            request_timeout=max(1.0, min(10.0, self.connect_timeout_s)),
        )[self.topic]
        try:
            future.result(timeout=self.connect_timeout_s + 5.0)
        except KafkaException as exc:
            err = exc.args[0]
            if err.name() == "TOPIC_ALREADY_EXISTS":
                return
            raise InvalidConfigError(
                f"--state-topic {self.topic}: the cluster refused to create it ({err.name()}: {err.str()}); "
                f"grant this proxy's principal CREATE on Topic:{self.topic} (or the Cluster), or create it: "
                f"kafka-topics.sh --create --topic {self.topic} --partitions 1 --replication-factor "
                f"{self.replication_factor} --config cleanup.policy=compact"
            ) from None
        log.info("event=state_topic_created topic=%s replication_factor=%d", self.topic, self.replication_factor)

    def _assign(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])

    def _catch_up(self, deadline: float) -> None:
        """Read until the end offset the leader gave at the start (every record written before start-up)."""
        if not self._probe(max(0.1, deadline - time.monotonic())):
            return
        target = self._end
        while self._position < target and time.monotonic() < deadline:
            self._poll(0.1)
        if self._position >= target:
            self._caught_up = True
            log.info(
                "event=state_topic_loaded topic=%s records=%d subscriptions=%d",
                self.topic,
                self._position,
                sum(1 for c in self._state.values() if c is not None),
            )
        else:
            self._why = f"read {self._position} of {target} records in time"

    # ------------------------------------------------------------------------------ following

    def follow(self, on_change: Callable[[StateDict], None], lock: Any) -> None:
        """Apply every record written from now on: ``on_change(state)`` with the whole admin state after each
        change, called while holding ``lock`` (the lock under which the caller reads the state and its
        :meth:`versions`)."""
        self._on_change = on_change
        self._lock = lock
        self._thread = threading.Thread(target=self._run, name=f"kip714-state-topic-{self.topic}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        next_probe = 0.0
        while not self._stop.is_set():
            if not self._consumer.assignment() and not self._find():
                continue
            now = time.monotonic()
            if now >= next_probe:
                next_probe = now + PROBE_INTERVAL_S
                self._probe(1.0)
            self._poll(0.1)

    def _find(self) -> bool:
        """Find the topic after a start-up the cluster did not answer (a topic kip714 cannot use is logged, and
        the replica stays not ready)."""
        try:
            return self._prepare(time.monotonic() + 2.0)
        except InvalidConfigError as exc:
            self._why = str(exc)
            log.error("event=state_topic_refused %s", exc)
            self._stop.wait(PROBE_INTERVAL_S * 5)
            return False

    def _probe(self, timeout_s: float) -> bool:
        """Ask the partition's leader for its end offset: whether it answered (the lag, readiness)."""
        from confluent_kafka import TopicPartition

        try:
            _, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=timeout_s)
        except Exception as exc:  # KafkaException: the leader did not answer
            with self._cond:
                self._reachable = False
                self._why = f"the cluster does not answer ({_reason(exc)})"
            return False
        with self._cond:
            self._reachable = True
            self._end = high
            arrived = not self._caught_up and self._position >= high
            self._cond.notify_all()
        if arrived:
            with self._lock:  # what the replica served until now (the cache, or nothing) gives way to the topic
                self._save_cache()
                self._caught_up = True
                if self._on_change is not None:
                    self._on_change(dict(self._state))
            log.info("event=state_topic_caught_up topic=%s records=%d", self.topic, self._position)
        return True

    def _poll(self, timeout_s: float) -> None:
        # poll() returns with the first record; consume() would wait out its whole timeout for a batch
        first = self._consumer.poll(timeout_s)
        if first is None:
            return
        msgs = [first, *self._consumer.consume(500, timeout=0)]
        changed = False
        settled: list[tuple[int, bool]] = []
        with self._lock:
            for msg in msgs:
                if msg.error() is not None:
                    if msg.error().code() == _PARTITION_EOF:
                        # the end of the log: past offsets compaction removed there (a tombstone gone, say),
                        # which no record would move the position over
                        self._position = max(self._position, msg.offset())
                    else:
                        log.warning("event=state_topic_error topic=%s error=%s", self.topic, msg.error().str())
                    continue
                changed |= self._apply_record(msg, settled)
            changed = changed and self._caught_up  # before that, the replica serves what it had at start-up
            if changed and self._on_change is not None:
                self._on_change(dict(self._state))
        if changed:
            self._save_cache()
        with self._cond:
            self._reachable = True
            if self._writers:  # a writer learns its record's fate only once the state in force holds it
                self._outcomes.update(settled)
            self._cond.notify_all()

    def _save_cache(self) -> None:
        if self.cache is not None:
            try:
                self.cache.save(self._state)
            except OSError as exc:
                log.warning("event=state_cache_failed error=%r", exc)

    def _apply_record(self, msg: Any, settled: list[tuple[int, bool]]) -> bool:
        """One record in topic order: whether it changed the state (its offset and whether it was applied go to
        ``settled``)."""
        offset = msg.offset()
        self._position = offset + 1
        key = msg.key()
        try:
            if key is None:
                raise ValueError("no key")
            name = key.decode("utf-8")
            value = msg.value()
            entry = ABSENT if value is None else _config_of(value)
            base = _base_of(msg.headers())
        except (ValueError, UnicodeDecodeError) as exc:
            self.skipped += 1
            if not self._warned_skip:
                self._warned_skip = True
                log.warning(
                    "event=state_record_skipped topic=%s offset=%d error=%s (counted in "
                    "kip714_state_topic_records_skipped_total; logged once)",
                    self.topic,
                    offset,
                    exc,
                )
            settled.append((offset, False))
            return False
        if base is not None and base < self._versions.get(name, -1):
            self.stale += 1
            log.info("event=state_record_stale topic=%s name=%s offset=%d base=%d", self.topic, name, offset, base)
            settled.append((offset, False))
            return False
        self._versions[name] = offset
        self.applied += 1
        before = self._state.get(name, ABSENT)
        if entry is ABSENT:
            self._state.pop(name, None)
        else:
            self._state[name] = entry
        settled.append((offset, True))
        return bool(before != entry)

    # ------------------------------------------------------------------------------ writing

    def versions(self, names: list[str]) -> dict[str, int]:
        """name -> the offset of the record the state holds for it (-1: none). Read under the follow lock."""
        return {n: self._versions.get(n, -1) for n in names}

    #: other replicas change the state too
    shared = True

    def write(self, entries: Mapping[str, Any], bases: Mapping[str, int], state: StateDict | None = None) -> set[str]:
        """Write one record per name (``entries``: name -> config, None to hide, :data:`ABSENT` to delete),
        each computed from the record at ``bases[name]``; wait until each is acknowledged and read back.
        The names whose record was ignored (computed from a stale copy: compute again and retry).
        :class:`StateUnavailableError` when the topic cannot take them now."""
        if not self.ready:
            raise StateUnavailableError(f"the state topic {self.topic} cannot take changes now: {self.why}")
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        delivered: dict[str, int] = {}
        failed: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            name = msg.key().decode("utf-8")
            if err is not None:
                failed.append(f"{name}: {err.str()}")
            else:
                delivered[name] = msg.offset()

        with self._cond:
            self._writers += 1
        try:
            return self._write(entries, bases, delivered, failed, on_delivery, deadline)
        finally:
            with self._cond:
                self._writers -= 1
                for offset in delivered.values():
                    self._outcomes.pop(offset, None)
                if not self._writers:
                    self._outcomes.clear()

    def _write(
        self,
        entries: Mapping[str, Any],
        bases: Mapping[str, int],
        delivered: dict[str, int],
        failed: list[str],
        on_delivery: Callable[[Any, Any], None],
        deadline: float,
    ) -> set[str]:
        for name, entry in entries.items():
            value = None
            if entry is not ABSENT:
                body = {"format": _FORMAT, "config": entry, "replica": self.replica_id}
                value = json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")
            self._producer.produce(
                self.topic,
                key=name.encode("utf-8"),
                value=value,
                partition=0,
                headers=[(BASE_HEADER, str(bases.get(name, -1)).encode("ascii"))],
                on_delivery=on_delivery,
            )
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        if left or failed:
            raise StateUnavailableError(
                f"the state topic {self.topic} did not acknowledge the change: "
                + ("; ".join(failed) if failed else f"no answer within {WRITE_TIMEOUT_S:g}s")
            )
        with self._cond:
            ok = self._cond.wait_for(
                lambda: all(o in self._outcomes for o in delivered.values()), max(0.0, deadline - time.monotonic())
            )
            outcomes = {name: self._outcomes.get(o) for name, o in delivered.items()}
        if not ok:
            raise StateUnavailableError(
                f"the state topic {self.topic} acknowledged the change but this replica did not read it back "
                f"within {WRITE_TIMEOUT_S:g}s"
            )
        return {name for name, applied in outcomes.items() if not applied}

    # ------------------------------------------------------------------------------ health

    @property
    def caught_up(self) -> bool:
        """Read the topic to the end it had when the replica started (or when it first reached the cluster)."""
        return self._caught_up

    @property
    def ready(self) -> bool:
        """Caught up with the topic, and its leader answered at the last probe."""
        return self._caught_up and self._reachable

    @property
    def why(self) -> str:
        """Why :attr:`ready` is False."""
        if not self._caught_up:
            return f"catching up with the state topic {self.topic}: {self._why}"
        return f"the state topic {self.topic} is unreachable: {self._why}"

    def lag(self) -> int:
        """Records of the topic not applied yet (as of the last probe); -1 while its leader does not answer."""
        return -1 if self._end < 0 or not self._reachable else max(0, self._end - self._position)

    def close(self) -> None:
        """Stop following, and close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self._producer is not None:
            self._producer.flush(1.0)
            self._producer = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self.cache is not None:
            self.cache.close()

    def _on_error(self, err: Any) -> None:
        if err.name() == "_ALL_BROKERS_DOWN":
            with self._cond:
                self._reachable = False
                self._why = "every broker is down"
        log.debug("event=state_topic_client_error error=%s", err.str())


_UNKNOWN_TOPIC = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
_PARTITION_EOF = -191  # librdkafka's _PARTITION_EOF


def _reason(exc: Exception) -> str:
    err: Any = exc.args[0] if exc.args else None
    return str(err.str()) if hasattr(err, "str") else str(exc)

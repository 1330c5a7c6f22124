"""One batch of records through a transactional librdkafka producer, as the fault tests produce: the mock
cluster checks sequence numbers only for transactional producers, so a batch resent after a broker or a proxy
went away is never written twice."""

from __future__ import annotations

from typing import Any

Places = dict[bytes, tuple[int, int]]


def commit_batch(producer: Any, topic: str, values: list[bytes], key: Any) -> tuple[Places, str | None]:
    """Produce ``values`` (``key(n, value)`` the key of each) in one transaction, again in a new one when it
    must be aborted (ten times at most). Returns where each acknowledged value landed (partition, offset; empty
    when nothing committed) and what went wrong (None when every value committed with its delivery report)."""
    import confluent_kafka as ck

    for _ in range(10):
        places: Places = {}

        def delivered(err: Any, msg: Any, places: Places = places) -> None:
            if err is None:
                places[msg.value()] = (msg.partition(), msg.offset())

        try:
            producer.begin_transaction()
            for n, value in enumerate(values):
                producer.produce(topic, value=value, key=key(n, value), on_delivery=delivered)
            for _ in range(10):
                try:
                    producer.commit_transaction(60)
                    break
                except ck.KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
            producer.poll(0)
            if set(places) != set(values):
                return places, f"{values[0]!r}..: committed without every delivery report"
            return places, None
        except ck.KafkaException as exc:
            if exc.args[0].txn_requires_abort():
                producer.abort_transaction(60)
                continue
            return {}, f"{values[0]!r}..: {exc.args[0]}"
    return {}, f"{values[0]!r}..: aborted ten times"

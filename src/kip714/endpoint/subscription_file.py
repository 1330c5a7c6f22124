"""Subscription files for ``kip714 serve`` / ``kip714 proxy`` (``--config``): the format and a watcher that
re-applies the file when it changes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib

from ..broker.subscriptions import SubscriptionRegistry, parse_config_string

__all__ = ["SubscriptionFileWatcher", "load_subscription_file"]

log = logging.getLogger("kip714.endpoint")


def load_subscription_file(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """Subscriptions from a file: JSON ``{"name": {"metrics": "...", "interval.ms": "...", "match": "..."}}``
    or lines ``name metrics=[a,b],interval.ms=1000,match=[client_id=x]`` (``#`` starts a comment)."""
    text = pathlib.Path(path).read_text()
    if str(path).endswith(".json"):
        data = json.loads(text)
        return {name: {k: str(v) if not isinstance(v, list) else ",".join(map(str, v)) for k, v in cfg.items()}
                for name, cfg in data.items()}
    subs = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        subs[name] = parse_config_string(rest.strip())
    return subs


class SubscriptionFileWatcher:
    """Applies a subscription file to a registry and re-applies it when the file changes (each change
    bumps SubscriptionIds, as a config change does in Kafka)."""

    def __init__(self, registry: SubscriptionRegistry, path: str | os.PathLike) -> None:
        self.registry = registry
        self.path = pathlib.Path(path)
        self._mtime = None
        self._applied: dict[str, dict[str, str]] = {}
        self.reload()

    def reload(self) -> bool:
        stat = self.path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if key == self._mtime:
            return False
        subs = load_subscription_file(self.path)
        for name in set(self._applied) - set(subs):
            self.registry.delete(name)
        for name, cfg in subs.items():
            if self._applied.get(name) != cfg:
                self.registry.set(name, cfg)
        self._applied = subs
        self._mtime = key
        log.info("event=subscriptions_loaded file=%s count=%d version=%d", self.path, len(subs),
                 self.registry.version)
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.reload()
            except Exception as exc:  # keep serving the last good configuration
                log.error("event=subscriptions_reload_failed file=%s error=%r", self.path, exc)

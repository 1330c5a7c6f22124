"""Subscription files for ``kip714 serve`` / ``kip714 proxy`` (``--config``): the format and a watcher that
re-applies the file when it changes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib

from ..broker.subscription_layers import SubscriptionLayers
from ..broker.subscriptions import SubscriptionRegistry, parse_config_string
from ..errors import InvalidConfigError

__all__ = ["SubscriptionFileWatcher", "load_subscription_file"]

log = logging.getLogger("kip714.endpoint")


def load_subscription_file(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """Subscriptions from a file: JSON ``{"name": {"metrics": "...", "interval.ms": "...", "match": "..."}}``
    (a file named ``*.json``, or whose first non-blank character is ``{``) or lines
    ``name metrics=[a,b],interval.ms=1000,match=[client_id=x]`` (``#`` starts a comment)."""
    text = pathlib.Path(path).read_text()
    if str(path).endswith(".json") or text.lstrip().startswith("{"):  # an empty .json file is an error
        data = json.loads(text)
        if not isinstance(data, dict) or not all(isinstance(cfg, dict) for cfg in data.values()):
            raise InvalidConfigError("a JSON subscription file maps each name to an object of configs")
        return {
            name: {k: str(v) if not isinstance(v, list) else ",".join(map(str, v)) for k, v in cfg.items()}
            for name, cfg in data.items()
        }
    subs = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        subs[name] = parse_config_string(rest.strip())
    return subs


class SubscriptionFileWatcher:
    """Applies a subscription file (the ``subscription-file`` source of a
    :class:`~kip714.broker.subscription_layers.SubscriptionLayers`, or straight to a registry) and re-applies it
    when the file changes (each change bumps SubscriptionIds, as a config change does in Kafka).

    A file with any invalid entry changes nothing: every entry is validated before the registry is touched,
    the last good configuration keeps serving, and the failure is raised (logged by :meth:`watch`) once per
    version of the file."""

    def __init__(self, target: SubscriptionRegistry | SubscriptionLayers, path: str | os.PathLike[str]) -> None:
        self.layers = target if isinstance(target, SubscriptionLayers) else SubscriptionLayers(target)
        self.registry = self.layers.registry
        self.path = pathlib.Path(path)
        self._mtime: tuple[int, int] | None = None
        self._failed: tuple[int, int] | None = None
        self.reload()

    def reload(self, force: bool = False) -> bool:
        """Apply the file if it changed since the last attempt (``force``: even if not, as SIGHUP does); True
        if it was applied."""
        stat = self.path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if not force and (key == self._mtime or key == self._failed):
            return False
        try:
            subs = load_subscription_file(self.path)
            self.layers.set_base("subscription-file", subs)  # every entry validated before any change
        except Exception:
            self._failed = key
            raise
        self._failed = None
        self._mtime = key
        log.info("event=subscriptions_loaded file=%s count=%d version=%d", self.path, len(subs), self.registry.version)
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.reload()
            except Exception as exc:  # keep serving the last good configuration
                log.error("event=subscriptions_reload_failed file=%s error=%r", self.path, exc)

"""Where an endpoint's CLIENT_METRICS subscriptions come from, and which source wins.

Kafka has one source of client-metrics configs; kip714 has four. From the weakest to the strongest:

1. ``config-file``: the ``[subscriptions.NAME]`` tables of ``--config-file FILE.toml``;
2. ``subscription-file``: ``--config FILE`` (reloaded when it changes);
3. ``flags``: ``--metrics``/``--interval-ms``/``--match`` (the subscription named ``--subscription-name``);
4. ``admin``: what Kafka's admin API (IncrementalAlterConfigs, AlterConfigs) stored, in ``--state-dir`` (one
   process) or ``--state-topic`` (a fleet of proxies: every replica follows the others' changes).

A stronger source replaces a weaker one's subscription of the same name whole (configs are not merged key by
key). The admin API's stored state wins for every name it touched, deletions included: deleting through the
admin API a subscription a file or a flag defines stores a tombstone that hides it. When the admin state and a
file or a flag name the same subscription, :meth:`SubscriptionLayers.warn_overridden` says so (kip714 serve
and proxy call it at start and on every reload).

:class:`SubscriptionLayers` keeps the raw configs of every source, computes the effective set and applies the
difference to the :class:`~kip714.broker.subscriptions.SubscriptionRegistry` (only the names that changed,
so only they bump the registry's version and the clients' SubscriptionIds).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import cast

from ..errors import Kip714Error, StateUnavailableError
from .admin_state import ABSENT, StateDict, StateStore
from .subscriptions import SubscriptionRegistry

__all__ = ["ADMIN", "BASE_LAYERS", "SubscriptionLayers"]

log = logging.getLogger("kip714.subscriptions")

#: The sources below the admin API, weakest first.
BASE_LAYERS = ("config-file", "subscription-file", "flags")
#: The name of the admin API's source.
ADMIN = "admin"
_INITIAL = "registry"
_ORDER: tuple[str, ...] = (_INITIAL, *BASE_LAYERS)
#: How often a change to a shared store is computed again when other replicas changed the same names first.
_RETRIES = 8

Configs = dict[str, dict[str, str]]


class SubscriptionLayers:
    """The subscriptions of every source (see the module docstring) applied to ``registry``. ``store``: where
    the admin API's state is kept (a state folder or a state topic; None: admin changes live in memory only).
    Thread-safe."""

    def __init__(self, registry: SubscriptionRegistry, store: StateStore | None = None) -> None:
        self.registry = registry
        self.store = store
        self._lock = threading.RLock()
        # what the registry held already (a library user's own set() calls): the weakest source
        initial = {s.name: dict(s.config) for s in registry.subscriptions()}
        self._base: dict[str, Configs] = {_INITIAL: initial}
        admin = store.load() if store is not None else {}
        _validate(
            registry, {n: c for n, c in admin.items() if c is not None}, str(store.path) if store is not None else ADMIN
        )
        self._admin: StateDict = admin
        self._effective: Configs = {n: dict(c) for n, c in initial.items()}
        self._apply()
        self.rejected = 0  # configs another replica stored that this one refuses (a state topic's)
        if store is not None:
            store.follow(self._followed, self._lock)

    # -------------------------------------------------------------------------------- sources

    def set_base(self, layer: str, subscriptions: Mapping[str, Mapping[str, str]]) -> None:
        """Replace what source ``layer`` (one of :data:`BASE_LAYERS`) defines. Every entry is validated first
        (the registry's own checks, Kafka's error messages): one invalid entry changes nothing and raises."""
        if layer not in BASE_LAYERS:
            raise ValueError(f"unknown subscription source {layer!r}")
        subs = {str(n): {str(k): str(v) for k, v in c.items()} for n, c in subscriptions.items()}
        _validate(self.registry, subs, layer)
        with self._lock:
            self._base[layer] = subs
            self._apply()

    def check(self, layer: str, subscriptions: Mapping[str, Mapping[str, str]]) -> None:
        """What :meth:`set_base` would check, without changing anything (raises the first problem)."""
        if layer not in BASE_LAYERS:
            raise ValueError(f"unknown subscription source {layer!r}")
        _validate(self.registry, subscriptions, layer)

    def load_admin(self) -> StateDict:
        """The admin state as the state folder holds it now, checked (an operator may have edited it: e.g.
        removed a name to hand it back to the files); the state in force when there is no folder or the state
        is shared (a state topic: followed as it changes)."""
        if self.store is None or self.store.shared:
            with self._lock:
                return dict(self._admin)
        admin = self.store.load()
        _validate(self.registry, {n: c for n, c in admin.items() if c is not None}, str(self.store.path))
        return admin

    def replace_admin(self, state: StateDict) -> None:
        """Put ``state`` (from :meth:`load_admin`) in force as the admin API's source."""
        with self._lock:
            self._admin = {n: None if c is None else dict(c) for n, c in state.items()}
            self._apply()

    def change(
        self,
        changes: Mapping[str, Mapping[str, str] | None],
        recompute: Callable[[str], Mapping[str, str] | None] | None = None,
    ) -> None:
        """Store changes the admin API made (name -> its whole new config, or None: deleted) and apply them.
        Stored first (OSError, and nothing applied, when the state folder refuses the write;
        :class:`~kip714.errors.StateUnavailableError` when the state topic cannot take it). With a shared
        store, a change another replica made first to the same name is not undone: ``recompute(name)`` gives
        the name's new config again from the state in force, and that is stored instead."""
        pending: Mapping[str, Mapping[str, str] | None] = changes
        for _ in range(_RETRIES):
            with self._lock:
                admin = dict(self._admin)
                entries: dict[str, object] = {}
                for name, cfg in pending.items():
                    if cfg:
                        entry: object = dict(cfg)
                    elif any(name in self._base.get(layer, {}) for layer in _ORDER):
                        entry = None  # a tombstone hides what a file or a flag defines
                    else:
                        entry = ABSENT
                    if admin.get(name, ABSENT) == entry:
                        continue
                    entries[name] = entry
                    if entry is ABSENT:
                        admin.pop(name)
                    else:
                        admin[name] = cast("dict[str, str] | None", entry)
                if not entries:
                    return
                if self.store is None or not self.store.shared:
                    if self.store is not None:
                        self.store.write(entries, self.store.versions(list(entries)), admin)
                    self._admin = admin
                    self._apply()
                    return
                bases = self.store.versions(list(entries))
            # a shared store: written and read back without the lock (the follower applies it under the lock)
            stale = self.store.write(entries, bases, admin)
            if not stale:
                return
            if recompute is None:
                raise StateUnavailableError(f"{self.store.path}: another replica changed {', '.join(sorted(stale))}")
            with self._lock:
                pending = {name: recompute(name) for name in sorted(stale)}
        raise StateUnavailableError(
            f"{self.store.path if self.store is not None else 'the admin state'}: other replicas changed the same "
            f"subscriptions {_RETRIES} times while this change was written; try again"
        )

    def _followed(self, state: StateDict) -> None:
        """Another replica's change (called by a shared store, holding the lock): put ``state`` in force. A
        config this replica refuses (another kip714 version's keys...) is logged, counted and left out."""
        good: StateDict = {}
        for name, cfg in state.items():
            if cfg is not None:
                try:
                    _validate(self.registry, {name: cfg}, str(self.store.path if self.store else ADMIN))
                except Kip714Error as exc:
                    self.rejected += 1
                    log.warning("event=admin_state_rejected name=%s error=%s", name, exc)
                    continue
            good[name] = cfg
        self._admin = good
        self._apply()

    # -------------------------------------------------------------------------------- reading

    def effective(self) -> Configs:
        """name -> raw configs of every subscription in force (the registry's)."""
        return {s.name: dict(s.config) for s in self.registry.subscriptions()}

    def config(self, name: str) -> dict[str, str] | None:
        """The raw configs of subscription ``name`` in force (None when there is none)."""
        sub = self.registry.get(name)
        return None if sub is None else dict(sub.config)

    def names(self) -> list[str]:
        """The names of the subscriptions in force, in the registry's (Kafka's map) order."""
        return [s.name for s in self.registry.subscriptions()]

    def source(self, name: str) -> str | None:
        """The source the subscription ``name`` in force comes from (:data:`ADMIN` or a base layer)."""
        with self._lock:
            if name in self._admin:
                return ADMIN if self._admin[name] is not None else None
            for layer in reversed(_ORDER):
                if name in self._base.get(layer, {}):
                    return layer
            return None

    def overridden(self) -> dict[str, list[str]]:
        """name -> the base sources that define it while the admin state decides it."""
        with self._lock:
            out = {}
            for name in self._admin:
                layers = [layer for layer in _ORDER if name in self._base.get(layer, {})]
                if layers:
                    out[name] = layers
            return out

    def warn_overridden(self) -> None:
        """Log one warning per subscription the admin state decides while a file or a flag defines it too."""
        with self._lock:
            for name, layers in sorted(self.overridden().items()):
                deleted = self._admin[name] is None
                log.warning(
                    "event=subscription_overridden name=%s used=%s hidden=%s (the admin API changed this "
                    "subscription: its stored %s wins over %s)",
                    name,
                    "admin-deletion" if deleted else "admin",
                    ",".join(layers),
                    "deletion" if deleted else "version",
                    " and ".join(layers),
                )

    # -------------------------------------------------------------------------------- applying

    def _apply(self) -> None:
        effective: Configs = {}
        for layer in _ORDER:
            effective.update(self._base.get(layer, {}))
        for name, cfg in self._admin.items():
            if cfg is None:
                effective.pop(name, None)
            else:
                effective[name] = cfg
        old = self._effective
        for name in old.keys() - effective.keys():
            self.registry.delete(name)
        for name, cfg in effective.items():
            if old.get(name) != cfg:
                self.registry.set(name, cfg)
        self._effective = {n: dict(c) for n, c in effective.items()}


def _validate(registry: SubscriptionRegistry, subs: Mapping[str, Mapping[str, str]], where: str) -> None:
    """Every entry of ``subs`` through the registry's validation (a scratch registry: nothing changes); an
    invalid one raises its error (same class and Kafka error code) naming ``where`` and the subscription."""
    scratch = SubscriptionRegistry(jdk=registry.jdk)
    for name, cfg in subs.items():
        if not cfg:
            continue
        try:
            scratch.set(name, dict(cfg))
        except Kip714Error as exc:
            raise type(exc)(f"{where}: subscription {name!r}: {exc}", exc.error_code) from None

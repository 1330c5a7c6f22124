"""Where the CLIENT_METRICS changes made through Kafka's admin API are kept: a state folder (``--state-dir``).

One JSON file, ``DIR/client-metrics.json``, holds every subscription the admin API created or changed, and a
tombstone (``null``) for each one it deleted that a file or a flag still defines. It is replaced atomically on
every change (written to a temporary file in the same folder, fsync'd, renamed over the old one, the folder
fsync'd), so a crash or a ``kill -9`` at any moment leaves either the old state or the new one, never a mix;
a change is acknowledged to the client only once it is on disk. A lock file (``DIR/.lock``, ``flock``) keeps a
second kip714 from using the same folder at once; the kernel releases it when the process dies, however it
dies.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
from collections.abc import Callable, Mapping
from typing import IO, Any, Protocol

from ..errors import InvalidConfigError

__all__ = ["ABSENT", "STATE_FILE", "AdminStateStore", "StateDict", "StateStore"]

log = logging.getLogger("kip714.admin")

#: The file (inside the state folder) holding the subscriptions the admin API changed.
STATE_FILE = "client-metrics.json"
_FORMAT = 1

#: name -> the raw configs Kafka's admin API stored (``{"metrics": "a,b", "interval.ms": "1000"}``), or None
#: for a deletion that hides a subscription a file or a flag defines.
StateDict = dict[str, "dict[str, str] | None"]


#: An entry of a change that removes the name from the admin state (a tombstone in a state topic).
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()


class StateStore(Protocol):
    """Where the admin API's state is kept: a state folder (:class:`AdminStateStore`, one process) or a state
    topic (:class:`~kip714.broker.state_topic.StateTopicStore`, a fleet). The admin API does not know which."""

    #: where the state lives, for messages
    path: Any
    #: whether other processes change it too (then :meth:`write` returns once the change was read back)
    shared: bool

    def load(self) -> StateDict:
        """The state at start-up."""

    def versions(self, names: list[str]) -> dict[str, int]:
        """name -> the version the state holds (read under the lock given to :meth:`follow`)."""

    def write(self, entries: Mapping[str, Any], bases: Mapping[str, int], state: StateDict) -> set[str]:
        """Store ``entries`` (name -> config, None to hide, :data:`ABSENT` to remove), each computed from
        version ``bases[name]``; ``state``: the whole state after them. The names to compute again (their
        change was computed from a stale copy)."""

    def follow(self, on_change: Callable[[StateDict], None], lock: Any) -> None:
        """Call ``on_change(state)``, holding ``lock``, whenever another process changes the state."""

    def close(self) -> None:
        """Stop and release what the store holds."""


class AdminStateStore:
    """The admin API's CLIENT_METRICS state in ``directory`` (created if missing): :meth:`load` at start,
    :meth:`save` on every change (atomic and durable). Takes the folder's lock at once
    (:class:`~kip714.errors.InvalidConfigError` naming it when another process holds it)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = pathlib.Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidConfigError(f"--state-dir {self.directory}: cannot create it: {exc.strerror}") from None
        self.path = self.directory / STATE_FILE
        self._lock: IO[bytes] | None = None
        self._take_lock()

    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; one process per folder is the operator's job
            return
        lock = open(self.directory / ".lock", "a+b")  # noqa: SIM115  (held for the process's life)
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            raise InvalidConfigError(
                f"--state-dir {self.directory}: another kip714 process uses it (its .lock is held)"
            ) from None
        self._lock = lock

    #: the state is this process's alone (a state topic's is shared by a fleet)
    shared = False

    def versions(self, names: list[str]) -> dict[str, int]:
        """Every name at version -1: nobody else writes the folder (the :class:`StateStore` interface)."""
        return dict.fromkeys(names, -1)

    def write(self, entries: Mapping[str, Any], bases: Mapping[str, int], state: StateDict) -> set[str]:
        """Store ``state`` (the admin state with ``entries`` applied): :meth:`save`. Nothing to compute again."""
        self.save(state)
        return set()

    def follow(self, on_change: Callable[[StateDict], None], lock: Any) -> None:
        """Nothing to follow: only this process writes the folder."""

    def close(self) -> None:
        """Release the folder's lock."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def load(self) -> StateDict:
        """The stored state (empty when nothing was stored yet). A file that does not parse is an
        :class:`~kip714.errors.InvalidConfigError` naming it: kip714 never starts from a state it cannot read."""
        for stale in self.directory.glob(f".{STATE_FILE}.*.tmp"):  # a write a crash interrupted
            stale.unlink(missing_ok=True)
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InvalidConfigError(f"{self.path}: cannot read it: {exc.strerror}") from None
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != _FORMAT:
                raise ValueError(f"not a kip714 state file of format {_FORMAT}")
            subs = data["client_metrics"]
            if not isinstance(subs, dict):
                raise ValueError("client_metrics is not an object")
            out: StateDict = {}
            for name, cfg in subs.items():
                if cfg is not None and not (isinstance(cfg, dict) and all(isinstance(v, str) for v in cfg.values())):
                    raise ValueError(f"subscription {name!r} is neither null nor an object of strings")
                out[str(name)] = None if cfg is None else {str(k): v for k, v in cfg.items()}
        except (ValueError, KeyError) as exc:
            raise InvalidConfigError(f"{self.path}: not a readable kip714 state file ({exc})") from None
        return out

    def save(self, state: Mapping[str, Mapping[str, str] | None]) -> None:
        """Replace the stored state with ``state``, atomically and durably (OSError when the disk refuses)."""
        body: dict[str, Any] = {
            "format": _FORMAT,
            "client_metrics": {name: None if cfg is None else dict(cfg) for name, cfg in sorted(state.items())},
        }
        data = (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        tmp = self.directory / f".{STATE_FILE}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.directory)


def _fsync_dir(directory: pathlib.Path) -> None:
    """Make a rename in ``directory`` durable (where the platform can open a folder)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

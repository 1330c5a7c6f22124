"""One config file for ``kip714 serve`` and ``kip714 proxy``: ``--config-file FILE.toml``, ``KIP714_*``
environment variables, and ``--print-config``.

Every option of the command can be set in the file under its own name (the long option without ``--``:
``max-connections = 500``, ``record-sync = true``, ``otlp-header = ["Authorization=Bearer x"]``), and the
subscriptions can live there too (``[subscriptions.NAME]`` tables with Kafka's keys ``metrics``,
``"interval.ms"`` and ``match``; a list value is a Kafka LIST). Precedence, from the weakest:
the option's default < the file < a flag on the command line < the environment variable ``KIP714_<NAME>``
(the name upper-cased, dashes as underscores: ``KIP714_MAX_CONNECTIONS``). A key the command does not know is
an error naming it; so is a value of the wrong type. ``--print-config`` prints the effective settings as a
config file, each line saying where its value came from.

:func:`add_settings_options` adds ``--config-file`` and ``--print-config`` to a parser (call it last);
:func:`resolve` applies the file and the environment to the parsed arguments and returns the
:class:`Settings` (which :meth:`Settings.reload` reads again on SIGHUP).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError

__all__ = ["ENV_PREFIX", "SUBSCRIPTIONS_KEY", "Settings", "add_settings_options", "resolve"]

#: The table of the config file that holds subscriptions (``[subscriptions.NAME]``).
SUBSCRIPTIONS_KEY = "subscriptions"
#: The prefix of the environment variables that set options.
ENV_PREFIX = "KIP714_"
_NOT_SETTINGS = frozenset({"help", "config_file", "print_config"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
#: options whose values are secrets: --print-config masks them
_SECRET = frozenset({"otlp_header", "upstream_sasl_username", "upstream_sasl_password"})


def add_settings_options(parser: argparse.ArgumentParser) -> None:
    """``--config-file`` and ``--print-config`` (call after every other option of the command is added). An
    option that is required on the command line may come from the file or the environment instead: it is
    checked by :func:`resolve`."""
    g = parser.add_argument_group("config file")
    g.add_argument(
        "--config-file",
        metavar="FILE.toml",
        help="read the options from this TOML file, each under its own name without '--' (e.g. "
        "max-connections = 500), and subscriptions from its [subscriptions.NAME] tables; flags "
        f"override the file and {ENV_PREFIX}<NAME> environment variables (e.g. "
        f"{ENV_PREFIX}MAX_CONNECTIONS) override both; reloaded on SIGHUP (default: none)",
    )
    g.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective settings (as a config file, each with where it came from: default, "
        "file, flag or environment) and exit",
    )
    required = [a.dest for a in parser._actions if a.required]
    for action in parser._actions:
        action.required = False
    parser.set_defaults(_settings_parser=parser, _settings_required=tuple(required))


def _key(action: argparse.Action) -> str:
    return max((s for s in action.option_strings if s.startswith("--")), key=len)[2:]


def _env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace("-", "_")


def _settings_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """file key -> action, for every option that is a setting."""
    return {
        _key(a): a
        for a in parser._actions
        if a.option_strings and a.dest not in _NOT_SETTINGS and any(s.startswith("--") for s in a.option_strings)
    }


@dataclass
class Settings:
    """The effective settings of one command: ``values`` (dest -> value), ``origins`` (dest -> ``default``,
    ``file PATH``, ``flag --NAME`` or ``env NAME``), the ``subscriptions`` of the config file and where it is."""

    command: str
    parser: argparse.ArgumentParser
    given: dict[str, Any]
    environ: dict[str, str]
    path: pathlib.Path | None
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    subscriptions: dict[str, dict[str, str]] = field(default_factory=dict)

    def reload(self) -> Settings:
        """The settings with the config file read again (the flags and the environment as at the start);
        :class:`~kip714.errors.InvalidConfigError` naming the problem when the file is not good."""
        return _resolve(self.command, self.parser, self.given, self.environ, self.path)

    def render(self) -> str:
        """The effective settings as a TOML config file, each line commented with where its value came from
        (secrets masked)."""
        lines = [
            f"# kip714 {self.command}: the effective settings. Each value says where it came from: the "
            "default, the config file,",
            f"# a flag, or the environment ({ENV_PREFIX}<NAME>; it beats flags, which beat the file).",
            f"# config file: {self.path if self.path is not None else '(none)'}",
        ]
        for key, action in _settings_actions(self.parser).items():
            value = self.values.get(action.dest)
            origin = self.origins.get(action.dest, "default")
            if value is None:
                lines.append(f"# {key} = (not set)  # {origin}")
            else:
                lines.append(f"{key} = {_toml(value, secret=action.dest in _SECRET)}  # {origin}")
        for name, cfg in self.subscriptions.items():
            lines.append("")
            lines.append(f"[{SUBSCRIPTIONS_KEY}.{_toml_key(name)}]  # file {self.path}")
            for k, v in cfg.items():
                lines.append(f"{_toml_key(k)} = {_toml(v)}")
        return "\n".join(lines) + "\n"


def resolve(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Apply the config file and the ``KIP714_*`` environment (default ``os.environ``) to ``args`` in place, and
    return the :class:`Settings`. ``args._argv`` is the command line ``args`` was parsed from (``kip714.cli.main``
    sets it; default ``sys.argv[1:]``): it tells the flags given from the defaults. Raises
    :class:`~kip714.errors.InvalidConfigError` for a file that does not parse, an unknown key or a bad value; an
    option required on the command line and set nowhere is a usage error (exit status 2)."""
    parser: argparse.ArgumentParser = args._settings_parser
    argv = list(getattr(args, "_argv", None) or sys.argv[1:])
    command = args.command if hasattr(args, "command") else parser.prog.split()[-1]
    words = argv[argv.index(command) + 1 :] if command in argv else argv
    given = _given(parser, words)
    environ = dict(os.environ if environ is None else environ)
    path = given.get("config_file") or environ.get(_env_name("config-file")) or None
    settings = _resolve(command, parser, given, environ, pathlib.Path(path) if path else None)
    for dest, value in settings.values.items():
        setattr(args, dest, value)
    for dest in args._settings_required:
        if getattr(args, dest, None) is None:
            action = next(a for a in parser._actions if a.dest == dest)
            key = _key(action)
            parser.error(
                f"the following arguments are required: --{key} (or {key} in --config-file, or {_env_name(key)})"
            )
    args.file_subscriptions = settings.subscriptions
    return settings


def _given(parser: argparse.ArgumentParser, words: list[str]) -> dict[str, Any]:
    """dest -> value of the options given on the command line (parsed again with every default suppressed)."""
    saved = [(a, a.default) for a in parser._actions]
    saved_defaults = dict(parser._defaults)
    try:
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        parser._defaults.clear()
        namespace, _ = parser.parse_known_args(words)
    finally:
        for action, default in saved:
            action.default = default
        parser._defaults.update(saved_defaults)
    return vars(namespace)


def _resolve(
    command: str,
    parser: argparse.ArgumentParser,
    given: dict[str, Any],
    environ: dict[str, str],
    path: pathlib.Path | None,
) -> Settings:
    settings = Settings(command, parser, given, environ, path)
    actions = _settings_actions(parser)
    file_values: dict[str, Any] = {}
    if path is not None:
        data = _read_toml(path)
        subs = data.pop(SUBSCRIPTIONS_KEY, {})
        settings.subscriptions = _subscriptions(subs, path)
        for key, value in data.items():
            action = actions.get(key)
            if action is None:
                raise InvalidConfigError(
                    f"{path}: unknown key {key!r}: kip714 {command} has no option --{key}" + _did_you_mean(key, actions)
                )
            file_values[action.dest] = _convert(action, value, f"{path}: {key}")
    for key, action in actions.items():
        dest = action.dest
        env = _env_name(key)
        if env in environ:
            settings.values[dest] = _convert(action, environ[env], f"environment variable {env}")
            settings.origins[dest] = f"env {env}"
        elif dest in given:
            settings.values[dest] = given[dest]
            settings.origins[dest] = f"flag --{key}"
        elif dest in file_values:
            settings.values[dest] = file_values[dest]
            settings.origins[dest] = f"file {path}"
        else:
            settings.values[dest] = _default(parser, action)
            settings.origins[dest] = "default"
    settings.values["config_file"] = str(path) if path is not None else None
    return settings


def _default(parser: argparse.ArgumentParser, action: argparse.Action) -> Any:
    """An option's default as argparse gives it (a string default goes through the option's type)."""
    default = action.default
    if isinstance(default, str) and action.type is not None:
        return parser._get_value(action, default)
    return default


def _read_toml(path: pathlib.Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover (3.10)
        import tomli as tomllib  # type: ignore[import-not-found]
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InvalidConfigError(f"--config-file {path}: no such file") from None
    except OSError as exc:
        raise InvalidConfigError(f"--config-file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfigError(f"{path}: not valid TOML: {exc}") from None


def _subscriptions(table: Any, path: pathlib.Path) -> dict[str, dict[str, str]]:
    """``[subscriptions.NAME]`` tables -> name -> Kafka config strings (a list becomes a Kafka LIST)."""
    if not isinstance(table, dict):
        raise InvalidConfigError(f"{path}: {SUBSCRIPTIONS_KEY} must be a table of [{SUBSCRIPTIONS_KEY}.NAME] tables")
    out: dict[str, dict[str, str]] = {}
    for name, cfg in table.items():
        if not isinstance(cfg, dict):
            raise InvalidConfigError(
                f'{path}: {SUBSCRIPTIONS_KEY}.{name} must be a table (metrics, "interval.ms", match)'
            )
        conf: dict[str, str] = {}
        for key, value in cfg.items():
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                conf[key] = ",".join(value)
            elif isinstance(value, (str, int)) and not isinstance(value, bool):
                conf[key] = str(value)
            else:
                raise InvalidConfigError(
                    f"{path}: {SUBSCRIPTIONS_KEY}.{name}.{key}: expected a string, an integer or a list of strings"
                )
        out[str(name)] = conf
    return out


def _convert(action: argparse.Action, value: Any, where: str) -> Any:
    """A value from the file (TOML types) or the environment (a string) as the option's flag would give it."""
    if action.nargs == 0:  # store_true
        if isinstance(value, str):
            word = value.strip().lower()
            if word in _TRUE or word in _FALSE:
                return word in _TRUE
        elif isinstance(value, bool):
            return value
        raise InvalidConfigError(f"{where}: expected true or false, got {value!r}")
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [_one(action, item, where) for item in items]
    return _one(action, value, where)


def _one(action: argparse.Action, value: Any, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidConfigError(f"{where}: expected a string or a number, got {value!r}")
    text = str(value)
    try:
        result = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
        raise InvalidConfigError(f"{where}: {exc}") from None
    if action.choices is not None and result not in action.choices:
        raise InvalidConfigError(f"{where}: {text!r} is not one of {', '.join(map(str, action.choices))}")
    return result


def _did_you_mean(key: str, actions: Mapping[str, argparse.Action]) -> str:
    dashed = key.replace("_", "-").lstrip("-")
    return f" (did you mean {dashed!r}?)" if dashed in actions else ""


def _toml_key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else json.dumps(key)


def _toml(value: Any, secret: bool = False) -> str:
    """A setting's value in TOML (the form its option reads back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return json.dumps(f"{value[0]}={'***' if secret else value[1]}")  # K=V (--otlp-header)
    if isinstance(value, tuple) and len(value) == 2:
        host, port = value
        return json.dumps(f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}")
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v, secret) for v in value) + "]"
    return json.dumps(str(value))

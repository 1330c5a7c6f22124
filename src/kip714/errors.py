"""The kip714 exception hierarchy (public; ``Kip714Error`` is also in ``kip714``): every exception class of the
library is defined here.

Every exception kip714 raises for bad input is a :class:`Kip714Error` and carries the Kafka error code
an Apache Kafka broker would answer with (``.error_code``, a :class:`~kip714.ErrorCode`). (Two private
exceptions stay where they are used, as control flow that never leaves its module: the proxy's ``_Drop``
and the rewriter's ``_Short``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._enums import ErrorCode

if TYPE_CHECKING:
    from ._protocol import RequestHeader

__all__ = [
    "Kip714Error",
    "MalformedFrameError",
    "FrameTooLargeError",
    "UnsupportedApiKeyError",
    "UnsupportedVersionError",
    "InvalidRequestError",
    "InvalidConfigError",
    "StateUnavailableError",
    "UnsupportedCompressionTypeError",
    "CorruptPayloadError",
    "TelemetryTooLargeError",
    "MissingExtraError",
    "SparkJobError",
    "UnsafePatternError",
    "RewriteError",
    "ListenerError",
    "ProxyProtocolError",
]


class Kip714Error(Exception):
    """Base class. ``error_code`` is the Kafka error a broker would answer this input with."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", error_code: ErrorCode | int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = ErrorCode(error_code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r}, error_code={self.error_code.name})"


class InvalidRequestError(Kip714Error):
    """A request Kafka would refuse as INVALID_REQUEST (42)."""

    error_code = ErrorCode.INVALID_REQUEST


class MalformedFrameError(InvalidRequestError):
    """Bytes that do not parse as the Kafka message they claim to be (truncated, bad lengths, bad tags)."""


class FrameTooLargeError(MalformedFrameError):
    """A size prefix over the frame limit (Kafka's ``socket.request.max.bytes``); nothing was allocated."""


class UnsupportedApiKeyError(InvalidRequestError):
    """A request header naming an API key kip714 does not decode."""

    #: the request's header, set by :func:`~kip714.wire.decode_request` (which raises it)
    header: RequestHeader


class UnsupportedVersionError(Kip714Error):
    """An API version outside what kip714 (and Kafka) support for that key: UNSUPPORTED_VERSION (35)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION
    #: the request's header, set when :func:`~kip714.wire.decode_request` raises it (the one raiser that does)
    header: RequestHeader


class InvalidConfigError(Kip714Error):
    """A configuration value Kafka rejects as INVALID_CONFIG (40)."""

    error_code = ErrorCode.INVALID_CONFIG


class StateUnavailableError(Kip714Error):
    """The shared admin state (``kip714 proxy --state-topic``) cannot take a change now: the cluster does not
    answer, or the replica has not caught up. REQUEST_TIMED_OUT (7), as a broker whose controller does not
    answer gives."""

    error_code = ErrorCode.REQUEST_TIMED_OUT


class UnsupportedCompressionTypeError(Kip714Error):
    """A compression type id outside 0..4: UNSUPPORTED_COMPRESSION_TYPE (76)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class CorruptPayloadError(Kip714Error):
    """A payload that does not decompress or decode: INVALID_RECORD (87)."""

    error_code = ErrorCode.INVALID_RECORD


class TelemetryTooLargeError(Kip714Error):
    """A payload over the size limit (wire or decompressed): TELEMETRY_TOO_LARGE (118)."""

    error_code = ErrorCode.TELEMETRY_TOO_LARGE


class MissingExtraError(ImportError):
    """A part of kip714 needs an optional extra that is not installed (not bad input: no Kafka error code).
    The message names the extra to install, ``extra`` holds it and ``name`` (as for any ImportError) the
    missing module: ``OtlpForwarder needs the export extra: pip install 'kip714[export]'``."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        super().__init__(f"{what} needs the {extra} extra: pip install 'kip714[{extra}]'", name=module)
        self.what = what
        self.extra = extra


class SparkJobError(Exception):
    """A Spark job failed (a JVM out of memory or gone, a failed stage): not bad input, so no Kafka error
    code. The message is one line saying what ran out and which setting to raise; the Spark or Py4J error
    is its ``__cause__``."""


class UnsafePatternError(InvalidConfigError, ValueError):
    """A client-metrics ``match`` pattern that cannot be matched in bounded time (backreferences, lookaround,
    too large a program): refused when the subscription is set, as INVALID_CONFIG. Also a ``ValueError``,
    as it was before it became a :class:`Kip714Error`."""


class RewriteError(Kip714Error):
    """A response names a broker address the proxy cannot map to one of its listeners: the proxy closes the
    connection rather than hand a client a real address."""


class ListenerError(RewriteError, InvalidConfigError):
    """A broker the cluster names cannot get its listener (its node id maps to no usable port, or the port is
    taken): a configuration error when the proxy starts; on a client's connection later (a broker added to
    the cluster), that connection's error, as any answer the proxy cannot rewrite."""

    error_code = InvalidConfigError.error_code


class ProxyProtocolError(InvalidRequestError):
    """A connection that should open with a PROXY protocol header (``--proxy-protocol``) does not: the
    endpoint closes it. ``reason`` says why, as the ``kip714_proxy_protocol_refused_total`` label does
    (``missing``, ``bad``, ``too_long``)."""

    def __init__(self, message: str = "", reason: str = "bad") -> None:
        super().__init__(message)
        self.reason = reason

# Kafka's numbers as the native core needs them at C level. Their one home is kip714/_enums.py
# (ErrorCode, CompressionType); tests/test_constants.py checks every value here against it.

cdef enum:
    E_NONE = 0
    E_INVALID_REQUEST = 42
    E_UNSUPPORTED_COMPRESSION_TYPE = 76
    E_INVALID_RECORD = 87
    E_THROTTLING_QUOTA_EXCEEDED = 89
    E_UNKNOWN_SUBSCRIPTION_ID = 117
    E_TELEMETRY_TOO_LARGE = 118

cdef enum:
    C_NONE = 0
    C_GZIP = 1
    C_SNAPPY = 2
    C_LZ4 = 3
    C_ZSTD = 4

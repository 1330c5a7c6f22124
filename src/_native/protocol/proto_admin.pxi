# ApiVersions (18) v0-v4 and Metadata (3) v0-v13: what a client needs before it may push telemetry.
# Included into _protocol.pyx; uses its helpers. Field layouts follow Kafka's message schemas.

import re as _re

#: KIP-511's pattern for ClientSoftwareName / ClientSoftwareVersion (full match).
SOFTWARE_PATTERN = _re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

cdef int32_t AUTHORIZED_OPERATIONS_OMITTED = -2147483648


# --------------------------------------------------------------------------------------- ApiVersions

@cython.final
cdef class ApiVersionsRequest(Message):
    """ApiVersions request v0-v4; v3+ carries KIP-511's client software name and version."""

    API_KEY = K_API_VERSIONS
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 4
    FIELDS = ("client_software_name", "client_software_version", "unknown_tagged_fields")

    cdef public object client_software_name
    cdef public object client_software_version
    cdef public object unknown_tagged_fields

    def __init__(self, client_software_name="", client_software_version="", unknown_tagged_fields=None):
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.unknown_tagged_fields = unknown_tagged_fields

    def is_valid(self):
        """Kafka's KIP-511 check (applied to v3+): both strings full-match
        ``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``. A broker answers INVALID_REQUEST otherwise."""
        return (SOFTWARE_PATTERN.fullmatch(self.client_software_name or "") is not None
                and SOFTWARE_PATTERN.fullmatch(self.client_software_version or "") is not None)

    cdef int _write(self, KWriter* w, int version) except -1:
        if version >= 3:
            kw_utf8(w, self.client_software_name, True, False, "client_software_name")
            kw_utf8(w, self.client_software_version, True, False, "client_software_version")
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_api_versions_request(KReader* r, int version):
    cdef ApiVersionsRequest m = ApiVersionsRequest.__new__(ApiVersionsRequest)
    if version >= 3:
        m.client_software_name = kr_cstr(r, "clientSoftwareName", False)
        m.client_software_version = kr_cstr(r, "clientSoftwareVersion", False)
        m.unknown_tagged_fields = kr_tagged_fields(r)
    else:
        m.client_software_name = ""
        m.client_software_version = ""
        m.unknown_tagged_fields = None
    return m


@cython.final
cdef class ApiVersion(Message):
    """One ApiKeys entry of an ApiVersions response."""

    FIELDS = ("api_key", "min_version", "max_version", "unknown_tagged_fields")

    cdef public int16_t api_key
    cdef public int16_t min_version
    cdef public int16_t max_version
    cdef public object unknown_tagged_fields

    def __init__(self, api_key=0, min_version=0, max_version=0, unknown_tagged_fields=None):
        self.api_key = api_key
        self.min_version = min_version
        self.max_version = max_version
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class SupportedFeature(Message):
    """One SupportedFeatures entry (ApiVersions response v3+, tag 0)."""

    FIELDS = ("name", "min_version", "max_version", "unknown_tagged_fields")

    cdef public object name
    cdef public int16_t min_version
    cdef public int16_t max_version
    cdef public object unknown_tagged_fields

    def __init__(self, name="", min_version=0, max_version=0, unknown_tagged_fields=None):
        self.name = name
        self.min_version = min_version
        self.max_version = max_version
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class FinalizedFeature(Message):
    """One FinalizedFeatures entry (ApiVersions response v3+, tag 2)."""

    FIELDS = ("name", "max_version_level", "min_version_level", "unknown_tagged_fields")

    cdef public object name
    cdef public int16_t max_version_level
    cdef public int16_t min_version_level
    cdef public object unknown_tagged_fields

    def __init__(self, name="", max_version_level=0, min_version_level=0, unknown_tagged_fields=None):
        self.name = name
        self.max_version_level = max_version_level
        self.min_version_level = min_version_level
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class ApiVersionsResponse(Message):
    """ApiVersions response v0-v4. Its header is always response header v0. Answer an unsupported
    request version with error 35 encoded at version 0, as Kafka does."""

    API_KEY = K_API_VERSIONS
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 4
    FIELDS = ("error_code", "api_keys", "throttle_time_ms", "supported_features",
              "finalized_features_epoch", "finalized_features", "zk_migration_ready",
              "unknown_tagged_fields")

    cdef public int16_t error_code
    cdef public list api_keys
    cdef public int32_t throttle_time_ms
    cdef public list supported_features
    cdef public int64_t finalized_features_epoch
    cdef public list finalized_features
    cdef public bint zk_migration_ready
    cdef public object unknown_tagged_fields

    def __init__(self, error_code=0, api_keys=None, throttle_time_ms=0, supported_features=None,
                 finalized_features_epoch=-1, finalized_features=None, zk_migration_ready=False,
                 unknown_tagged_fields=None):
        self.error_code = error_code
        self.api_keys = _as_list(api_keys, "api_keys")
        self.throttle_time_ms = throttle_time_ms
        self.supported_features = _as_list(supported_features, "supported_features")
        self.finalized_features_epoch = finalized_features_epoch
        self.finalized_features = _as_list(finalized_features, "finalized_features")
        self.zk_migration_ready = zk_migration_ready
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 3
        cdef ApiVersion k
        cdef dict known
        kw_i16(w, self.error_code)
        kw_array_len(w, self.api_keys, flexible)
        for k in self.api_keys:
            kw_i16(w, k.api_key)
            kw_i16(w, k.min_version)
            kw_i16(w, k.max_version)
            if flexible:
                kw_tags(w, k.unknown_tagged_fields)
        if version >= 1:
            kw_i32(w, self.throttle_time_ms)
        if flexible:
            known = {}
            if self.supported_features:
                known[0] = _encode_supported_features(self.supported_features)
            if self.finalized_features_epoch != -1:
                known[1] = _encode_i64(self.finalized_features_epoch)
            if self.finalized_features:
                known[2] = _encode_finalized_features(self.finalized_features)
            if self.zk_migration_ready:
                known[3] = b"\x01"
            kw_tags(w, _merge_tags(known, self.unknown_tagged_fields))
        return 0


cdef bytes _encode_i64(int64_t v):
    cdef KWriter w
    kw_init(&w)
    try:
        kw_i64(&w, v)
        return kw_to_bytes(&w)
    finally:
        kw_free(&w)


cdef bytes _encode_supported_features(list items):
    cdef KWriter w
    cdef SupportedFeature f
    kw_init(&w)
    try:
        kw_array_len(&w, items, True)
        for f in items:
            kw_utf8(&w, f.name, True, False, "SupportedFeatures name")
            kw_i16(&w, f.min_version)
            kw_i16(&w, f.max_version)
            kw_tags(&w, f.unknown_tagged_fields)
        return kw_to_bytes(&w)
    finally:
        kw_free(&w)


cdef bytes _encode_finalized_features(list items):
    cdef KWriter w
    cdef FinalizedFeature f
    kw_init(&w)
    try:
        kw_array_len(&w, items, True)
        for f in items:
            kw_utf8(&w, f.name, True, False, "FinalizedFeatures name")
            kw_i16(&w, f.max_version_level)
            kw_i16(&w, f.min_version_level)
            kw_tags(&w, f.unknown_tagged_fields)
        return kw_to_bytes(&w)
    finally:
        kw_free(&w)


cdef object _dec_api_versions_response(KReader* r, int version):
    cdef ApiVersionsResponse m = ApiVersionsResponse.__new__(ApiVersionsResponse)
    cdef bint flexible = version >= 3
    cdef Py_ssize_t i, n
    cdef ApiVersion k
    cdef list keys
    m.error_code = kr_i16(r)
    n = kr_array_v(r, flexible, "apiKeys", 7 if flexible else 6, False)
    keys = [None] * n
    for i in range(n):
        k = ApiVersion.__new__(ApiVersion)
        k.api_key = kr_i16(r)
        k.min_version = kr_i16(r)
        k.max_version = kr_i16(r)
        k.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        keys[i] = k
    m.api_keys = keys
    m.throttle_time_ms = kr_i32(r) if version >= 1 else 0
    m.supported_features = []
    m.finalized_features_epoch = -1
    m.finalized_features = []
    m.zk_migration_ready = False
    m.unknown_tagged_fields = None
    if flexible:
        tags = kr_tagged_fields(r)
        if tags:
            if 0 in tags:
                m.supported_features = _with_reader(tags.pop(0), _dec_supported_features, 0, 0, False)
            if 1 in tags:
                m.finalized_features_epoch = _with_reader(tags.pop(1), _dec_tag_i64, 0, 0, False)
            if 2 in tags:
                m.finalized_features = _with_reader(tags.pop(2), _dec_finalized_features, 0, 0, False)
            if 3 in tags:
                m.zk_migration_ready = _with_reader(tags.pop(3), _dec_tag_bool, 0, 0, False)
            m.unknown_tagged_fields = tags or None
    return m


cdef object _dec_tag_i64(KReader* r, object src, int a, int b, bint c):
    v = kr_i64(r)
    _check_end(r, "tagged field")
    return v


cdef object _dec_tag_bool(KReader* r, object src, int a, int b, bint c):
    v = kr_bool(r)
    _check_end(r, "tagged field")
    return v


cdef object _dec_supported_features(KReader* r, object src, int a, int b, bint c):
    cdef Py_ssize_t i, n = kr_array_v(r, True, "supportedFeatures", 6, False)
    cdef list out = [None] * n
    cdef SupportedFeature f
    for i in range(n):
        f = SupportedFeature.__new__(SupportedFeature)
        f.name = kr_cstr(r, "name", False)
        f.min_version = kr_i16(r)
        f.max_version = kr_i16(r)
        f.unknown_tagged_fields = kr_tagged_fields(r)
        out[i] = f
    _check_end(r, "SupportedFeatures")
    return out


cdef object _dec_finalized_features(KReader* r, object src, int a, int b, bint c):
    cdef Py_ssize_t i, n = kr_array_v(r, True, "finalizedFeatures", 6, False)
    cdef list out = [None] * n
    cdef FinalizedFeature f
    for i in range(n):
        f = FinalizedFeature.__new__(FinalizedFeature)
        f.name = kr_cstr(r, "name", False)
        f.max_version_level = kr_i16(r)
        f.min_version_level = kr_i16(r)
        f.unknown_tagged_fields = kr_tagged_fields(r)
        out[i] = f
    _check_end(r, "FinalizedFeatures")
    return out


# ------------------------------------------------------------------------------------------ Metadata

@cython.final
cdef class MetadataRequestTopic(Message):
    """One topic of a Metadata request: ``name`` (nullable from v10) and ``topic_id`` (v10+)."""

    FIELDS = ("topic_id", "name", "unknown_tagged_fields")

    cdef public object topic_id
    cdef public object name
    cdef public object unknown_tagged_fields

    def __init__(self, name=None, topic_id=None, unknown_tagged_fields=None):
        self.name = name
        self.topic_id = topic_id if topic_id is not None else _make_uuid(0, 0)
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class MetadataRequest(Message):
    """Metadata request v0-v13. ``topics=None`` asks for all topics (v1+); ``[]`` for none."""

    API_KEY = K_METADATA
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 13
    FIELDS = ("topics", "allow_auto_topic_creation", "include_cluster_authorized_operations",
              "include_topic_authorized_operations", "unknown_tagged_fields")

    cdef public object topics
    cdef public bint allow_auto_topic_creation
    cdef public bint include_cluster_authorized_operations
    cdef public bint include_topic_authorized_operations
    cdef public object unknown_tagged_fields

    def __init__(self, topics=(), allow_auto_topic_creation=True,
                 include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
                 unknown_tagged_fields=None):
        self.topics = None if topics is None else list(topics)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.include_cluster_authorized_operations = include_cluster_authorized_operations
        self.include_topic_authorized_operations = include_topic_authorized_operations
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 9
        cdef MetadataRequestTopic t
        cdef uint64_t msb, lsb
        if self.topics is None and version == 0:
            raise ValueError("Metadata v0 cannot ask for all topics (topics=None)")
        kw_array_len(w, self.topics, flexible)
        if self.topics is not None:
            for t in self.topics:
                if version >= 10:
                    _uuid_halves(t.topic_id, &msb, &lsb)
                    kw_uuid(w, msb, lsb)
                kw_utf8(w, t.name, flexible, version >= 10, "topic name")
                if flexible:
                    kw_tags(w, t.unknown_tagged_fields)
        if version >= 4:
            kw_i8(w, 1 if self.allow_auto_topic_creation else 0)
        if 8 <= version <= 10:
            kw_i8(w, 1 if self.include_cluster_authorized_operations else 0)
        if version >= 8:
            kw_i8(w, 1 if self.include_topic_authorized_operations else 0)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_metadata_request(KReader* r, int version):
    cdef MetadataRequest m = MetadataRequest.__new__(MetadataRequest)
    cdef bint flexible = version >= 9
    cdef Py_ssize_t i, n
    cdef MetadataRequestTopic t
    cdef uint64_t msb, lsb
    n = kr_array_v(r, flexible, "topics", 1 if flexible else 2, version >= 1)
    if n < 0:
        m.topics = None
    else:
        topics = [None] * n
        for i in range(n):
            t = MetadataRequestTopic.__new__(MetadataRequestTopic)
            if version >= 10:
                kr_uuid(r, &msb, &lsb)
                t.topic_id = _make_uuid(msb, lsb)
            else:
                t.topic_id = _make_uuid(0, 0)
            t.name = kr_string_v(r, flexible, "name", version >= 10)
            t.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
            topics[i] = t
        m.topics = topics
    m.allow_auto_topic_creation = kr_bool(r) if version >= 4 else True
    m.include_cluster_authorized_operations = kr_bool(r) if 8 <= version <= 10 else False
    m.include_topic_authorized_operations = kr_bool(r) if version >= 8 else False
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


@cython.final
cdef class MetadataResponseBroker(Message):
    """One broker of a Metadata response."""

    FIELDS = ("node_id", "host", "port", "rack", "unknown_tagged_fields")

    cdef public int32_t node_id
    cdef public object host
    cdef public int32_t port
    cdef public object rack
    cdef public object unknown_tagged_fields

    def __init__(self, node_id=0, host="", port=0, rack=None, unknown_tagged_fields=None):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.rack = rack
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class MetadataResponsePartition(Message):
    """One partition of a Metadata response topic."""

    FIELDS = ("error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes",
              "isr_nodes", "offline_replicas", "unknown_tagged_fields")

    cdef public int16_t error_code
    cdef public int32_t partition_index
    cdef public int32_t leader_id
    cdef public int32_t leader_epoch
    cdef public list replica_nodes
    cdef public list isr_nodes
    cdef public list offline_replicas
    cdef public object unknown_tagged_fields

    def __init__(self, error_code=0, partition_index=0, leader_id=0, leader_epoch=-1,
                 replica_nodes=None, isr_nodes=None, offline_replicas=None, unknown_tagged_fields=None):
        self.error_code = error_code
        self.partition_index = partition_index
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replica_nodes = _as_list(replica_nodes, "replica_nodes")
        self.isr_nodes = _as_list(isr_nodes, "isr_nodes")
        self.offline_replicas = _as_list(offline_replicas, "offline_replicas")
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class MetadataResponseTopic(Message):
    """One topic of a Metadata response."""

    FIELDS = ("error_code", "name", "topic_id", "is_internal", "partitions",
              "topic_authorized_operations", "unknown_tagged_fields")

    cdef public int16_t error_code
    cdef public object name
    cdef public object topic_id
    cdef public bint is_internal
    cdef public list partitions
    cdef public int32_t topic_authorized_operations
    cdef public object unknown_tagged_fields

    def __init__(self, error_code=0, name=None, topic_id=None, is_internal=False, partitions=None,
                 topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, unknown_tagged_fields=None):
        self.error_code = error_code
        self.name = name
        self.topic_id = topic_id if topic_id is not None else _make_uuid(0, 0)
        self.is_internal = is_internal
        self.partitions = _as_list(partitions, "partitions")
        self.topic_authorized_operations = topic_authorized_operations
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class MetadataResponse(Message):
    """Metadata response v0-v13. A KIP-714 endpoint lists itself as the only broker and no topics."""

    API_KEY = K_METADATA
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 13
    FIELDS = ("throttle_time_ms", "brokers", "cluster_id", "controller_id", "topics",
              "cluster_authorized_operations", "error_code", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public list brokers
    cdef public object cluster_id
    cdef public int32_t controller_id
    cdef public list topics
    cdef public int32_t cluster_authorized_operations
    cdef public int16_t error_code
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, brokers=None, cluster_id=None, controller_id=-1, topics=None,
                 cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED, error_code=0,
                 unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.brokers = _as_list(brokers, "brokers")
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.topics = _as_list(topics, "topics")
        self.cluster_authorized_operations = cluster_authorized_operations
        self.error_code = error_code
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 9
        cdef MetadataResponseBroker b
        cdef MetadataResponseTopic t
        cdef MetadataResponsePartition p
        cdef uint64_t msb, lsb
        if version >= 3:
            kw_i32(w, self.throttle_time_ms)
        kw_array_len(w, self.brokers, flexible)
        for b in self.brokers:
            kw_i32(w, b.node_id)
            kw_utf8(w, b.host, flexible, False, "broker host")
            kw_i32(w, b.port)
            if version >= 1:
                kw_utf8(w, b.rack, flexible, True, "broker rack")
            if flexible:
                kw_tags(w, b.unknown_tagged_fields)
        if version >= 2:
            kw_utf8(w, self.cluster_id, flexible, True, "cluster_id")
        if version >= 1:
            kw_i32(w, self.controller_id)
        kw_array_len(w, self.topics, flexible)
        for t in self.topics:
            kw_i16(w, t.error_code)
            kw_utf8(w, t.name, flexible, version >= 12, "topic name")
            if version >= 10:
                _uuid_halves(t.topic_id, &msb, &lsb)
                kw_uuid(w, msb, lsb)
            if version >= 1:
                kw_i8(w, 1 if t.is_internal else 0)
            kw_array_len(w, t.partitions, flexible)
            for p in t.partitions:
                kw_i16(w, p.error_code)
                kw_i32(w, p.partition_index)
                kw_i32(w, p.leader_id)
                if version >= 7:
                    kw_i32(w, p.leader_epoch)
                _write_int32_array(w, p.replica_nodes, flexible)
                _write_int32_array(w, p.isr_nodes, flexible)
                if version >= 5:
                    _write_int32_array(w, p.offline_replicas, flexible)
                if flexible:
                    kw_tags(w, p.unknown_tagged_fields)
            if version >= 8:
                kw_i32(w, t.topic_authorized_operations)
            if flexible:
                kw_tags(w, t.unknown_tagged_fields)
        if 8 <= version <= 10:
            kw_i32(w, self.cluster_authorized_operations)
        if version >= 13:
            kw_i16(w, self.error_code)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef int _write_int32_array(KWriter* w, list items, bint flexible) except -1:
    kw_array_len(w, items, flexible)
    cdef object v
    for v in items:
        _check_i32(v, "node id")
        kw_i32(w, v)
    return 0


cdef list _read_int32_array(KReader* r, bint flexible, str what):
    cdef Py_ssize_t i, n = kr_array_v(r, flexible, what, 4, False)
    cdef list out = [None] * n
    for i in range(n):
        out[i] = kr_i32(r)
    return out


cdef object _dec_metadata_response(KReader* r, int version):
    cdef MetadataResponse m = MetadataResponse.__new__(MetadataResponse)
    cdef bint flexible = version >= 9
    cdef Py_ssize_t i, j, n, np
    cdef MetadataResponseBroker b
    cdef MetadataResponseTopic t
    cdef MetadataResponsePartition p
    cdef uint64_t msb, lsb
    cdef list brokers, topics, parts
    m.throttle_time_ms = kr_i32(r) if version >= 3 else 0
    n = kr_array_v(r, flexible, "brokers", 9 if flexible else 10, False)
    brokers = [None] * n
    for i in range(n):
        b = MetadataResponseBroker.__new__(MetadataResponseBroker)
        b.node_id = kr_i32(r)
        b.host = kr_string_v(r, flexible, "host", False)
        b.port = kr_i32(r)
        b.rack = kr_string_v(r, flexible, "rack", True) if version >= 1 else None
        b.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        brokers[i] = b
    m.brokers = brokers
    m.cluster_id = kr_string_v(r, flexible, "clusterId", True) if version >= 2 else None
    m.controller_id = kr_i32(r) if version >= 1 else -1
    n = kr_array_v(r, flexible, "topics", 6 if flexible else 8, False)
    topics = [None] * n
    for i in range(n):
        t = MetadataResponseTopic.__new__(MetadataResponseTopic)
        t.error_code = kr_i16(r)
        t.name = kr_string_v(r, flexible, "name", version >= 12)
        if version >= 10:
            kr_uuid(r, &msb, &lsb)
            t.topic_id = _make_uuid(msb, lsb)
        else:
            t.topic_id = _make_uuid(0, 0)
        t.is_internal = kr_bool(r) if version >= 1 else False
        np = kr_array_v(r, flexible, "partitions", 12 if flexible else 18, False)
        parts = [None] * np
        for j in range(np):
            p = MetadataResponsePartition.__new__(MetadataResponsePartition)
            p.error_code = kr_i16(r)
            p.partition_index = kr_i32(r)
            p.leader_id = kr_i32(r)
            p.leader_epoch = kr_i32(r) if version >= 7 else -1
            p.replica_nodes = _read_int32_array(r, flexible, "replicaNodes")
            p.isr_nodes = _read_int32_array(r, flexible, "isrNodes")
            p.offline_replicas = _read_int32_array(r, flexible, "offlineReplicas") if version >= 5 else []
            p.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
            parts[j] = p
        t.partitions = parts
        t.topic_authorized_operations = kr_i32(r) if version >= 8 else AUTHORIZED_OPERATIONS_OMITTED
        t.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        topics[i] = t
    m.topics = topics
    m.cluster_authorized_operations = (kr_i32(r) if 8 <= version <= 10
                                       else AUTHORIZED_OPERATIONS_OMITTED)
    m.error_code = kr_i16(r) if version >= 13 else 0
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m

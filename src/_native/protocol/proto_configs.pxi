# The config admin messages kip714 answers for CLIENT_METRICS resources (KIP-714's subscriptions as Kafka's
# admin API manages them): DescribeConfigs (32) v1-v4, AlterConfigs (33) v0-v2, IncrementalAlterConfigs (44)
# v0-v1 and ListConfigResources (74, formerly ListClientMetricsResources) v0-v1, requests and responses.
# Included into _protocol.pyx; uses its helpers. Field layouts follow Kafka's message schemas
# (clients/src/main/resources/common/message/{DescribeConfigs,AlterConfigs,IncrementalAlterConfigs,
# ListConfigResources}{Request,Response}.json); none of them declares a tagged field, so only unknown tags
# are kept.


cdef list _read_string_array(KReader* r, bint flexible, str what, bint nullable):
    """An array of (non-null) strings; None for a null array where ``nullable``."""
    cdef Py_ssize_t i, n = kr_array_v(r, flexible, what, 1 if flexible else 2, nullable)
    if n < 0:
        return None
    cdef list out = [None] * n
    cdef str element = what + " element"
    for i in range(n):
        out[i] = kr_string_v(r, flexible, element, False)
    return out


cdef int _write_string_array(KWriter* w, object items, bint flexible, bint nullable, str what) except -1:
    if items is None and not nullable:
        raise ValueError(f"{what} may not be None")
    kw_array_len(w, items, flexible)
    if items is not None:
        for s in items:
            kw_utf8(w, s, flexible, False, what + " element")
    return 0


# ----------------------------------------------------------------------------------- DescribeConfigs

@cython.final
cdef class DescribeConfigsResource(Message):
    """One resource of a DescribeConfigs request: ``configuration_keys`` None asks for every key."""

    FIELDS = ("resource_type", "resource_name", "configuration_keys", "unknown_tagged_fields")

    cdef public int8_t resource_type
    cdef public object resource_name
    cdef public object configuration_keys
    cdef public object unknown_tagged_fields

    def __init__(self, resource_type=0, resource_name="", configuration_keys=None, unknown_tagged_fields=None):
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.configuration_keys = None if configuration_keys is None else _as_list(configuration_keys,
                                                                                   "configuration_keys")
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class DescribeConfigsRequest(Message):
    """DescribeConfigs request v1-v4 (key 32; v0 left Kafka in 4.0); flexible from v4."""

    API_KEY = K_DESCRIBE_CONFIGS
    IS_REQUEST = True
    MIN_VERSION = 1
    MAX_VERSION = 4
    FIELDS = ("resources", "include_synonyms", "include_documentation", "unknown_tagged_fields")

    cdef public list resources
    cdef public bint include_synonyms
    cdef public bint include_documentation
    cdef public object unknown_tagged_fields

    def __init__(self, resources=None, include_synonyms=False, include_documentation=False,
                 unknown_tagged_fields=None):
        self.resources = _as_list(resources, "resources")
        self.include_synonyms = include_synonyms
        self.include_documentation = include_documentation
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 4
        cdef DescribeConfigsResource res
        kw_array_len(w, self.resources, flexible)
        for res in self.resources:
            kw_i8(w, res.resource_type)
            kw_utf8(w, res.resource_name, flexible, False, "resourceName")
            _write_string_array(w, res.configuration_keys, flexible, True, "configurationKeys")
            if flexible:
                kw_tags(w, res.unknown_tagged_fields)
        kw_i8(w, 1 if self.include_synonyms else 0)
        if version >= 3:
            kw_i8(w, 1 if self.include_documentation else 0)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_describe_configs_request(KReader* r, int version):
    cdef DescribeConfigsRequest m = DescribeConfigsRequest.__new__(DescribeConfigsRequest)
    cdef bint flexible = version >= 4
    cdef Py_ssize_t i, n = kr_array_v(r, flexible, "resources", 4 if flexible else 7, False)
    cdef DescribeConfigsResource res
    cdef list resources = [None] * n
    for i in range(n):
        res = DescribeConfigsResource.__new__(DescribeConfigsResource)
        res.resource_type = kr_i8(r)
        res.resource_name = kr_string_v(r, flexible, "resourceName", False)
        res.configuration_keys = _read_string_array(r, flexible, "configurationKeys", True)
        res.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        resources[i] = res
    m.resources = resources
    m.include_synonyms = kr_bool(r)
    m.include_documentation = kr_bool(r) if version >= 3 else False
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


@cython.final
cdef class DescribeConfigsSynonym(Message):
    """One synonym of a described config (v1+)."""

    FIELDS = ("name", "value", "source", "unknown_tagged_fields")

    cdef public object name
    cdef public object value
    cdef public int8_t source
    cdef public object unknown_tagged_fields

    def __init__(self, name="", value=None, source=0, unknown_tagged_fields=None):
        self.name = name
        self.value = value
        self.source = source
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class DescribeConfigsResourceResult(Message):
    """One described config: ``config_source`` (v1+: 5 DEFAULT_CONFIG, 7 CLIENT_METRICS_CONFIG, ...),
    ``synonyms`` (v1+), ``config_type`` and ``documentation`` (v3+; left out of older versions)."""

    FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive", "synonyms", "config_type",
              "documentation", "unknown_tagged_fields")

    cdef public object name
    cdef public object value
    cdef public bint read_only
    cdef public int8_t config_source
    cdef public bint is_sensitive
    cdef public list synonyms
    cdef public int8_t config_type
    cdef public object documentation
    cdef public object unknown_tagged_fields

    def __init__(self, name="", value=None, read_only=False, config_source=-1, is_sensitive=False, synonyms=None,
                 config_type=0, documentation=None, unknown_tagged_fields=None):
        self.name = name
        self.value = value
        self.read_only = read_only
        self.config_source = config_source
        self.is_sensitive = is_sensitive
        self.synonyms = _as_list(synonyms, "synonyms")
        self.config_type = config_type
        self.documentation = documentation
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class DescribeConfigsResult(Message):
    """The answer for one resource of a DescribeConfigs request."""

    FIELDS = ("error_code", "error_message", "resource_type", "resource_name", "configs", "unknown_tagged_fields")

    cdef public int16_t error_code
    cdef public object error_message
    cdef public int8_t resource_type
    cdef public object resource_name
    cdef public list configs
    cdef public object unknown_tagged_fields

    def __init__(self, error_code=0, error_message=None, resource_type=0, resource_name="", configs=None,
                 unknown_tagged_fields=None):
        self.error_code = error_code
        self.error_message = error_message
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.configs = _as_list(configs, "configs")
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class DescribeConfigsResponse(Message):
    """DescribeConfigs response v1-v4."""

    API_KEY = K_DESCRIBE_CONFIGS
    IS_REQUEST = False
    MIN_VERSION = 1
    MAX_VERSION = 4
    FIELDS = ("throttle_time_ms", "results", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public list results
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, results=None, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.results = _as_list(results, "results")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 4
        cdef DescribeConfigsResult res
        cdef DescribeConfigsResourceResult c
        cdef DescribeConfigsSynonym s
        kw_i32(w, self.throttle_time_ms)
        kw_array_len(w, self.results, flexible)
        for res in self.results:
            kw_i16(w, res.error_code)
            kw_utf8(w, res.error_message, flexible, True, "errorMessage")
            kw_i8(w, res.resource_type)
            kw_utf8(w, res.resource_name, flexible, False, "resourceName")
            kw_array_len(w, res.configs, flexible)
            for c in res.configs:
                kw_utf8(w, c.name, flexible, False, "name")
                kw_utf8(w, c.value, flexible, True, "value")
                kw_i8(w, 1 if c.read_only else 0)
                kw_i8(w, c.config_source)
                kw_i8(w, 1 if c.is_sensitive else 0)
                kw_array_len(w, c.synonyms, flexible)
                for s in c.synonyms:
                    kw_utf8(w, s.name, flexible, False, "synonym name")
                    kw_utf8(w, s.value, flexible, True, "synonym value")
                    kw_i8(w, s.source)
                    if flexible:
                        kw_tags(w, s.unknown_tagged_fields)
                if version >= 3:
                    kw_i8(w, c.config_type)
                    kw_utf8(w, c.documentation, flexible, True, "documentation")
                if flexible:
                    kw_tags(w, c.unknown_tagged_fields)
            if flexible:
                kw_tags(w, res.unknown_tagged_fields)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_describe_configs_response(KReader* r, int version):
    cdef DescribeConfigsResponse m = DescribeConfigsResponse.__new__(DescribeConfigsResponse)
    cdef bint flexible = version >= 4
    cdef Py_ssize_t i, j, k, n, nc, ns
    cdef DescribeConfigsResult res
    cdef DescribeConfigsResourceResult c
    cdef DescribeConfigsSynonym s
    cdef list results, configs, synonyms
    m.throttle_time_ms = kr_i32(r)
    n = kr_array_v(r, flexible, "results", 7 if flexible else 11, False)
    results = [None] * n
    for i in range(n):
        res = DescribeConfigsResult.__new__(DescribeConfigsResult)
        res.error_code = kr_i16(r)
        res.error_message = kr_string_v(r, flexible, "errorMessage", True)
        res.resource_type = kr_i8(r)
        res.resource_name = kr_string_v(r, flexible, "resourceName", False)
        nc = kr_array_v(r, flexible, "configs", 9 if flexible else 11, False)
        configs = [None] * nc
        for j in range(nc):
            c = DescribeConfigsResourceResult.__new__(DescribeConfigsResourceResult)
            c.name = kr_string_v(r, flexible, "name", False)
            c.value = kr_string_v(r, flexible, "value", True)
            c.read_only = kr_bool(r)
            c.config_source = kr_i8(r)
            c.is_sensitive = kr_bool(r)
            ns = kr_array_v(r, flexible, "synonyms", 4 if flexible else 5, False)
            synonyms = [None] * ns
            for k in range(ns):
                s = DescribeConfigsSynonym.__new__(DescribeConfigsSynonym)
                s.name = kr_string_v(r, flexible, "name", False)
                s.value = kr_string_v(r, flexible, "value", True)
                s.source = kr_i8(r)
                s.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
                synonyms[k] = s
            c.synonyms = synonyms
            if version >= 3:
                c.config_type = kr_i8(r)
                c.documentation = kr_string_v(r, flexible, "documentation", True)
            else:
                c.config_type = 0
                c.documentation = None
            c.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
            configs[j] = c
        res.configs = configs
        res.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        results[i] = res
    m.results = results
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


# ------------------------------------------------------------------------- AlterConfigs (legacy, 33)

@cython.final
cdef class AlterableConfig(Message):
    """One config of an AlterConfigs resource: the whole config is replaced by the given set."""

    FIELDS = ("name", "value", "unknown_tagged_fields")

    cdef public object name
    cdef public object value
    cdef public object unknown_tagged_fields

    def __init__(self, name="", value=None, unknown_tagged_fields=None):
        self.name = name
        self.value = value
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class AlterConfigsResource(Message):
    """One resource of an AlterConfigs request."""

    FIELDS = ("resource_type", "resource_name", "configs", "unknown_tagged_fields")

    cdef public int8_t resource_type
    cdef public object resource_name
    cdef public list configs
    cdef public object unknown_tagged_fields

    def __init__(self, resource_type=0, resource_name="", configs=None, unknown_tagged_fields=None):
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.configs = _as_list(configs, "configs")
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class AlterConfigsRequest(Message):
    """AlterConfigs request v0-v2 (key 33, deprecated by IncrementalAlterConfigs); flexible from v2."""

    API_KEY = K_ALTER_CONFIGS
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 2
    FIELDS = ("resources", "validate_only", "unknown_tagged_fields")

    cdef public list resources
    cdef public bint validate_only
    cdef public object unknown_tagged_fields

    def __init__(self, resources=None, validate_only=False, unknown_tagged_fields=None):
        self.resources = _as_list(resources, "resources")
        self.validate_only = validate_only
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 2
        cdef AlterConfigsResource res
        cdef AlterableConfig c
        kw_array_len(w, self.resources, flexible)
        for res in self.resources:
            kw_i8(w, res.resource_type)
            kw_utf8(w, res.resource_name, flexible, False, "resourceName")
            kw_array_len(w, res.configs, flexible)
            for c in res.configs:
                kw_utf8(w, c.name, flexible, False, "name")
                kw_utf8(w, c.value, flexible, True, "value")
                if flexible:
                    kw_tags(w, c.unknown_tagged_fields)
            if flexible:
                kw_tags(w, res.unknown_tagged_fields)
        kw_i8(w, 1 if self.validate_only else 0)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_alter_configs_request(KReader* r, int version):
    cdef AlterConfigsRequest m = AlterConfigsRequest.__new__(AlterConfigsRequest)
    cdef bint flexible = version >= 2
    cdef Py_ssize_t i, j, n, nc
    cdef AlterConfigsResource res
    cdef AlterableConfig c
    cdef list resources, configs
    n = kr_array_v(r, flexible, "resources", 4 if flexible else 7, False)
    resources = [None] * n
    for i in range(n):
        res = AlterConfigsResource.__new__(AlterConfigsResource)
        res.resource_type = kr_i8(r)
        res.resource_name = kr_string_v(r, flexible, "resourceName", False)
        nc = kr_array_v(r, flexible, "configs", 3 if flexible else 4, False)
        configs = [None] * nc
        for j in range(nc):
            c = AlterableConfig.__new__(AlterableConfig)
            c.name = kr_string_v(r, flexible, "name", False)
            c.value = kr_string_v(r, flexible, "value", True)
            c.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
            configs[j] = c
        res.configs = configs
        res.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        resources[i] = res
    m.resources = resources
    m.validate_only = kr_bool(r)
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


@cython.final
cdef class AlterConfigsResourceResponse(Message):
    """The answer for one resource of an AlterConfigs or IncrementalAlterConfigs request."""

    FIELDS = ("error_code", "error_message", "resource_type", "resource_name", "unknown_tagged_fields")

    cdef public int16_t error_code
    cdef public object error_message
    cdef public int8_t resource_type
    cdef public object resource_name
    cdef public object unknown_tagged_fields

    def __init__(self, error_code=0, error_message=None, resource_type=0, resource_name="",
                 unknown_tagged_fields=None):
        self.error_code = error_code
        self.error_message = error_message
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.unknown_tagged_fields = unknown_tagged_fields


cdef int _write_alter_responses(KWriter* w, list responses, bint flexible) except -1:
    cdef AlterConfigsResourceResponse res
    kw_array_len(w, responses, flexible)
    for res in responses:
        kw_i16(w, res.error_code)
        kw_utf8(w, res.error_message, flexible, True, "errorMessage")
        kw_i8(w, res.resource_type)
        kw_utf8(w, res.resource_name, flexible, False, "resourceName")
        if flexible:
            kw_tags(w, res.unknown_tagged_fields)
    return 0


cdef list _read_alter_responses(KReader* r, bint flexible):
    cdef Py_ssize_t i, n = kr_array_v(r, flexible, "responses", 6 if flexible else 7, False)
    cdef AlterConfigsResourceResponse res
    cdef list out = [None] * n
    for i in range(n):
        res = AlterConfigsResourceResponse.__new__(AlterConfigsResourceResponse)
        res.error_code = kr_i16(r)
        res.error_message = kr_string_v(r, flexible, "errorMessage", True)
        res.resource_type = kr_i8(r)
        res.resource_name = kr_string_v(r, flexible, "resourceName", False)
        res.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        out[i] = res
    return out


@cython.final
cdef class AlterConfigsResponse(Message):
    """AlterConfigs response v0-v2."""

    API_KEY = K_ALTER_CONFIGS
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 2
    FIELDS = ("throttle_time_ms", "responses", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public list responses
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, responses=None, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.responses = _as_list(responses, "responses")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 2
        kw_i32(w, self.throttle_time_ms)
        _write_alter_responses(w, self.responses, flexible)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_alter_configs_response(KReader* r, int version):
    cdef AlterConfigsResponse m = AlterConfigsResponse.__new__(AlterConfigsResponse)
    cdef bint flexible = version >= 2
    m.throttle_time_ms = kr_i32(r)
    m.responses = _read_alter_responses(r, flexible)
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


# ------------------------------------------------------------------------ IncrementalAlterConfigs (44)

@cython.final
cdef class IncrementalAlterableConfig(Message):
    """One operation of an IncrementalAlterConfigs resource: ``config_operation`` 0 SET, 1 DELETE, 2 APPEND,
    3 SUBTRACT (Kafka's ``AlterConfigOp.OpType``); ``value`` None with DELETE."""

    FIELDS = ("name", "config_operation", "value", "unknown_tagged_fields")

    cdef public object name
    cdef public int8_t config_operation
    cdef public object value
    cdef public object unknown_tagged_fields

    def __init__(self, name="", config_operation=0, value=None, unknown_tagged_fields=None):
        self.name = name
        self.config_operation = config_operation
        self.value = value
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class IncrementalAlterConfigsResource(Message):
    """One resource of an IncrementalAlterConfigs request (Kafka's ``AlterConfigsResource`` of that message)."""

    FIELDS = ("resource_type", "resource_name", "configs", "unknown_tagged_fields")

    cdef public int8_t resource_type
    cdef public object resource_name
    cdef public list configs
    cdef public object unknown_tagged_fields

    def __init__(self, resource_type=0, resource_name="", configs=None, unknown_tagged_fields=None):
        self.resource_type = resource_type
        self.resource_name = resource_name
        self.configs = _as_list(configs, "configs")
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class IncrementalAlterConfigsRequest(Message):
    """IncrementalAlterConfigs request v0-v1 (key 44); flexible from v1."""

    API_KEY = K_INCREMENTAL_ALTER_CONFIGS
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 1
    FIELDS = ("resources", "validate_only", "unknown_tagged_fields")

    cdef public list resources
    cdef public bint validate_only
    cdef public object unknown_tagged_fields

    def __init__(self, resources=None, validate_only=False, unknown_tagged_fields=None):
        self.resources = _as_list(resources, "resources")
        self.validate_only = validate_only
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 1
        cdef IncrementalAlterConfigsResource res
        cdef IncrementalAlterableConfig c
        kw_array_len(w, self.resources, flexible)
        for res in self.resources:
            kw_i8(w, res.resource_type)
            kw_utf8(w, res.resource_name, flexible, False, "resourceName")
            kw_array_len(w, res.configs, flexible)
            for c in res.configs:
                kw_utf8(w, c.name, flexible, False, "name")
                kw_i8(w, c.config_operation)
                kw_utf8(w, c.value, flexible, True, "value")
                if flexible:
                    kw_tags(w, c.unknown_tagged_fields)
            if flexible:
                kw_tags(w, res.unknown_tagged_fields)
        kw_i8(w, 1 if self.validate_only else 0)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_incremental_alter_configs_request(KReader* r, int version):
    cdef IncrementalAlterConfigsRequest m = IncrementalAlterConfigsRequest.__new__(IncrementalAlterConfigsRequest)
    cdef bint flexible = version >= 1
    cdef Py_ssize_t i, j, n, nc
    cdef IncrementalAlterConfigsResource res
    cdef IncrementalAlterableConfig c
    cdef list resources, configs
    n = kr_array_v(r, flexible, "resources", 4 if flexible else 7, False)
    resources = [None] * n
    for i in range(n):
        res = IncrementalAlterConfigsResource.__new__(IncrementalAlterConfigsResource)
        res.resource_type = kr_i8(r)
        res.resource_name = kr_string_v(r, flexible, "resourceName", False)
        nc = kr_array_v(r, flexible, "configs", 4 if flexible else 5, False)
        configs = [None] * nc
        for j in range(nc):
            c = IncrementalAlterableConfig.__new__(IncrementalAlterableConfig)
            c.name = kr_string_v(r, flexible, "name", False)
            c.config_operation = kr_i8(r)
            c.value = kr_string_v(r, flexible, "value", True)
            c.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
            configs[j] = c
        res.configs = configs
        res.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
        resources[i] = res
    m.resources = resources
    m.validate_only = kr_bool(r)
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


@cython.final
cdef class IncrementalAlterConfigsResponse(Message):
    """IncrementalAlterConfigs response v0-v1 (the same layout as AlterConfigs')."""

    API_KEY = K_INCREMENTAL_ALTER_CONFIGS
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 1
    FIELDS = ("throttle_time_ms", "responses", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public list responses
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, responses=None, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.responses = _as_list(responses, "responses")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef bint flexible = version >= 1
        kw_i32(w, self.throttle_time_ms)
        _write_alter_responses(w, self.responses, flexible)
        if flexible:
            kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_incremental_alter_configs_response(KReader* r, int version):
    cdef IncrementalAlterConfigsResponse m = IncrementalAlterConfigsResponse.__new__(IncrementalAlterConfigsResponse)
    cdef bint flexible = version >= 1
    m.throttle_time_ms = kr_i32(r)
    m.responses = _read_alter_responses(r, flexible)
    m.unknown_tagged_fields = kr_tagged_fields(r) if flexible else None
    return m


# ---------------------------------------------------------------------------- ListConfigResources (74)

@cython.final
cdef class ListConfigResourcesRequest(Message):
    """ListConfigResources request v0-v1 (key 74; v0 is the former ListClientMetricsResources and lists
    CLIENT_METRICS only); flexible in every version. ``resource_types`` (v1+): empty means every supported
    type; a v0 request cannot carry any."""

    API_KEY = K_LIST_CONFIG_RESOURCES
    IS_REQUEST = True
    MIN_VERSION = 0
    MAX_VERSION = 1
    FIELDS = ("resource_types", "unknown_tagged_fields")

    cdef public list resource_types
    cdef public object unknown_tagged_fields

    def __init__(self, resource_types=None, unknown_tagged_fields=None):
        self.resource_types = _as_list(resource_types, "resource_types")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef object t
        if version >= 1:
            kw_array_len(w, self.resource_types, True)
            for t in self.resource_types:
                _check_i8(t, "resource_types item")
                kw_i8(w, t)
        elif self.resource_types:
            raise ValueError("ListConfigResources v0 has no ResourceTypes (it lists CLIENT_METRICS only)")
        kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_list_config_resources_request(KReader* r, int version):
    cdef ListConfigResourcesRequest m = ListConfigResourcesRequest.__new__(ListConfigResourcesRequest)
    cdef Py_ssize_t i, n
    cdef list types
    if version >= 1:
        n = kr_array_v(r, True, "resourceTypes", 1, False)
        types = [None] * n
        for i in range(n):
            types[i] = kr_i8(r)
        m.resource_types = types
    else:
        m.resource_types = []
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m


@cython.final
cdef class ConfigResource(Message):
    """One listed resource: its name and (v1+; 16, CLIENT_METRICS, in v0) its type."""

    FIELDS = ("resource_name", "resource_type", "unknown_tagged_fields")

    cdef public object resource_name
    cdef public int8_t resource_type
    cdef public object unknown_tagged_fields

    def __init__(self, resource_name="", resource_type=16, unknown_tagged_fields=None):
        self.resource_name = resource_name
        self.resource_type = resource_type
        self.unknown_tagged_fields = unknown_tagged_fields


@cython.final
cdef class ListConfigResourcesResponse(Message):
    """ListConfigResources response v0-v1 (a v0 answer carries names only: the type is left out)."""

    API_KEY = K_LIST_CONFIG_RESOURCES
    IS_REQUEST = False
    MIN_VERSION = 0
    MAX_VERSION = 1
    FIELDS = ("throttle_time_ms", "error_code", "config_resources", "unknown_tagged_fields")

    cdef public int32_t throttle_time_ms
    cdef public int16_t error_code
    cdef public list config_resources
    cdef public object unknown_tagged_fields

    def __init__(self, throttle_time_ms=0, error_code=0, config_resources=None, unknown_tagged_fields=None):
        self.throttle_time_ms = throttle_time_ms
        self.error_code = error_code
        self.config_resources = _as_list(config_resources, "config_resources")
        self.unknown_tagged_fields = unknown_tagged_fields

    cdef int _write(self, KWriter* w, int version) except -1:
        cdef ConfigResource c
        kw_i32(w, self.throttle_time_ms)
        kw_i16(w, self.error_code)
        kw_array_len(w, self.config_resources, True)
        for c in self.config_resources:
            kw_utf8(w, c.resource_name, True, False, "resourceName")
            if version >= 1:
                kw_i8(w, c.resource_type)
            kw_tags(w, c.unknown_tagged_fields)
        kw_tags(w, self.unknown_tagged_fields)
        return 0


cdef object _dec_list_config_resources_response(KReader* r, int version):
    cdef ListConfigResourcesResponse m = ListConfigResourcesResponse.__new__(ListConfigResourcesResponse)
    cdef Py_ssize_t i, n
    cdef ConfigResource c
    cdef list items
    m.throttle_time_ms = kr_i32(r)
    m.error_code = kr_i16(r)
    n = kr_array_v(r, True, "configResources", 3 if version >= 1 else 2, False)
    items = [None] * n
    for i in range(n):
        c = ConfigResource.__new__(ConfigResource)
        c.resource_name = kr_cstr(r, "resourceName", False)
        c.resource_type = kr_i8(r) if version >= 1 else 16
        c.unknown_tagged_fields = kr_tagged_fields(r)
        items[i] = c
    m.config_resources = items
    m.unknown_tagged_fields = kr_tagged_fields(r)
    return m

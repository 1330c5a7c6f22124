# Included by _protocol.pyx: reading and writing Kafka field types on top of the bounded reader and writer
# (kbuf.pxd): UUIDs (built straight into uuid.UUID's slots), strings as Kafka decodes them, arrays, byte
# buffers, tagged fields, and the range checks of the encoders.

# --------------------------------------------------------------------------------------------- helpers

cdef object _make_uuid(uint64_t msb, uint64_t lsb):
    """uuid.UUID from its two halves without going through UUID.__init__'s argument parsing
    (UUID is a __slots__ class: allocate it and fill its two slots, as UUID.__init__ would)."""
    cdef unsigned char b[16]
    kb_store_be64(b, msb)
    kb_store_be64(b + 8, lsb)
    cdef object value = _uuid_int(b)
    cdef object u = _uuid_alloc(<PyTypeObject*>_UUID, 0)
    if _UUID_INT_OFF > 0 and _UUID_SAFE_OFF > 0:
        _slot_init(u, _UUID_INT_OFF, value)
        _slot_init(u, _UUID_SAFE_OFF, _SAFE_UNKNOWN)
    else:
        PyObject_GenericSetAttr(u, "int", value)
        PyObject_GenericSetAttr(u, "is_safe", _SAFE_UNKNOWN)
    return u


cdef int _uuid_halves(object value, uint64_t* msb, uint64_t* lsb) except -1:
    """Accept uuid.UUID, 16 bytes-like, or None (the zero UUID)."""
    cdef object n
    if value is None:
        msb[0] = 0
        lsb[0] = 0
        return 0
    if isinstance(value, _UUID):
        n = value.int
    elif isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) != 16:
            raise ValueError(f"a UUID needs 16 bytes, got {len(value)}")
        n = _INT_FROM_BYTES(bytes(value), "big")
    else:
        raise TypeError(f"expected uuid.UUID or 16 bytes, got {type(value).__name__}")
    msb[0] = <uint64_t>(n >> 64)
    lsb[0] = <uint64_t>(n & 0xFFFFFFFFFFFFFFFF)
    return 0


cdef inline int kw_uuid(KWriter* w, uint64_t msb, uint64_t lsb) except -1:
    kw_reserve(w, 16)
    kb_store_be64(w.p + w.pos, msb)
    kb_store_be64(w.p + w.pos + 8, lsb)
    w.pos += 16
    return 0


cdef inline int kr_uuid(KReader* r, uint64_t* msb, uint64_t* lsb) except -1:
    kr_need(r, 16, "uuid")
    msb[0] = kb_load_be64(r.buf + r.pos)
    lsb[0] = kb_load_be64(r.buf + r.pos + 8)
    r.pos += 16
    return 0


cdef inline object _str_at(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "replace")


# Nulls and lengths follow Kafka's generated readers (MessageDataGenerator.generateVariableLengthReader):
# any negative length is null; null in a field that is not nullable at that version is refused with
# Kafka's text "non-nullable field <name> was serialized as null" (<name> is the camelCase field name, or
# "<name> element" for an element of an array of strings); a string longer than 0x7fff bytes is refused
# with "string field <name> had invalid length <n>". The table of which field is nullable in which
# version is in tests/test_nullability.py.

cdef inline int kr_null_refused(KReader* r, str what) except -1:
    return kr_bad(r, f"non-nullable field {what} was serialized as null")


cdef inline object kr_cstr(KReader* r, str what, bint nullable):
    """Compact string; Kafka's replacement-character UTF-8 decoding; null refused unless nullable."""
    cdef Py_ssize_t n = kr_compact_len(r, what)
    if n < 0:
        if not nullable:
            kr_null_refused(r, what)
        return None
    if n > 0x7fff:
        kr_bad(r, f"string field {what} had invalid length {n}")
    cdef object s = _str_at(r.buf + r.pos, n)
    r.pos += n
    return s


cdef inline object kr_str(KReader* r, str what, bint nullable):
    """Classic string (int16 length; any negative length is null)."""
    cdef int16_t n = kr_i16(r)
    if n < 0:
        if nullable:
            return None
        kr_null_refused(r, what)
    kr_need(r, n, what)
    cdef object s = _str_at(r.buf + r.pos, n)
    r.pos += n
    return s


cdef inline object kr_string_v(KReader* r, bint flexible, str what, bint nullable):
    return kr_cstr(r, what, nullable) if flexible else kr_str(r, what, nullable)


cdef inline Py_ssize_t kr_array_v(KReader* r, bint flexible, str what, Py_ssize_t min_size,
                                  bint nullable) except -2:
    cdef Py_ssize_t n
    if flexible:
        n = kr_compact_count(r, what, min_size)
    else:
        n = kr_classic_count(r, what, min_size)
    if n < 0 and not nullable:
        kr_null_refused(r, what)
    return n


cdef int kw_utf8(KWriter* w, object s, bint flexible, bint nullable, str what) except -1:
    """String field: compact (flexible) or int16-length (classic); None only where nullable."""
    cdef const char* data
    cdef Py_ssize_t n
    if s is None:
        if not nullable:
            raise ValueError(f"{what} may not be None")
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i16(w, -1)
        return 0
    if not isinstance(s, str):
        raise TypeError(f"{what} must be str, not {type(s).__name__}")
    data = PyUnicode_AsUTF8AndSize(s, &n)
    if n > 32767:  # Kafka's writers refuse it in both forms ("field is too long to be serialized")
        raise ValueError(f"{what} is longer than 32767 bytes")
    if flexible:
        kw_uvarint(w, <uint32_t>(n + 1))
    else:
        kw_i16(w, <int>n)
    kw_raw(w, <const unsigned char*>data, n)
    return 0


cdef inline int kw_array_len(KWriter* w, object seq, bint flexible) except -1:
    if seq is None:
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i32(w, -1)
        return 0
    if isinstance(seq, (str, bytes)):   # a bare string would be written one character per element
        raise TypeError(f"an array field takes a list, not {type(seq).__name__} {seq!r:.40}")
    cdef Py_ssize_t n = len(seq)
    if flexible:
        kw_uvarint(w, <uint32_t>(n + 1))
    else:
        kw_i32(w, n)
    return 0


cdef int kw_buffer(KWriter* w, object data, bint flexible) except -1:
    """Bytes field from any buffer; None writes null."""
    cdef Py_buffer view
    if data is None:
        if flexible:
            kw_uvarint(w, 0)
        else:
            kw_i32(w, -1)
        return 0
    if PyBytes_CheckExact(data):
        if flexible:
            kw_uvarint(w, <uint32_t>(PyBytes_GET_SIZE(data) + 1))
        else:
            kw_i32(w, PyBytes_GET_SIZE(data))
        kw_raw(w, <const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
        return 0
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if flexible:
            kw_uvarint(w, <uint32_t>(view.len + 1))
        else:
            kw_i32(w, view.len)
        kw_raw(w, <const unsigned char*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef int kw_tags(KWriter* w, object tags) except -1:
    """Write a tagged-field section from {tag: bytes} (None or empty writes the single 0 byte)."""
    if not tags:
        kw_uvarint(w, 0)
        return 0
    kw_uvarint(w, <uint32_t>len(tags))
    cdef object tag
    cdef Py_buffer view
    for tag in sorted(tags):
        # a tag is an unsigned varint of 32 bits on the wire (Kafka's readUnsignedVarint): every tag the
        # decoder accepts must encode again
        if not 0 <= tag <= 0xFFFFFFFF:
            raise ValueError(f"tag {tag} is out of range")
        kw_uvarint(w, <uint32_t>tag)
        PyObject_GetBuffer(tags[tag], &view, PyBUF_SIMPLE)
        try:
            kw_uvarint(w, <uint32_t>view.len)
            kw_raw(w, <const unsigned char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
    return 0


cdef list _as_list(object value, str what):
    """An array field's value as a list; a bare str or bytes (which ``list()`` would split into characters)
    is refused."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{what} takes a list, not {type(value).__name__} {value!r:.40}")
    return list(value)


cdef object _merge_tags(object known, object unknown):
    """Known tagged fields ({tag: encoded bytes}) plus the unknown ones kept from decoding."""
    if not unknown:
        return known
    if not known:
        return unknown
    out = dict(unknown)
    out.update(known)
    return out


cdef inline int _check_i8(object v, str what) except -1:
    if not -128 <= v <= 127:
        raise OverflowError(f"{what}={v} does not fit int8")
    return 0


cdef inline int _check_i16(object v, str what) except -1:
    if not -32768 <= v <= 32767:
        raise OverflowError(f"{what}={v} does not fit int16")
    return 0


cdef inline int _check_i32(object v, str what) except -1:
    if not -2147483648 <= v <= 2147483647:
        raise OverflowError(f"{what}={v} does not fit int32")
    return 0

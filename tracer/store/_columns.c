/* Store columns of span records, built in C (the optional accelerator of tracer/store/rows.py).
 *
 * Why: converting a chunk of span records to Arrow is the largest part of what tracing costs the
 * agent's thread (docs/performance.md). In Python it is a loop per attribute of every span
 * (cleaning, JSON, the promoted columns); here ``record_columns`` makes one pass over the chunk's
 * records and writes the Arrow buffers (validity bitmap, int32 offsets, data) directly, span events
 * included (below ``full`` detail every message event is one: docs/performance.md, round 9).
 *
 * The rules are the Python ones (tracer.spans.records.clean_attributes, tracer.store.rows): for a
 * record, a value or an id outside the usual (a set, a nested dict, a str subclass, text that is
 * not UTF-8, an int past 64 bits...) it returns None and the caller takes the Python path for the
 * whole chunk, so the two always give the same table (tests/tracer/store/test_columns.py).
 * The Python code it runs: orjson.dumps for floats (to write them exactly as orjson does), str() of
 * an int, float or bool session id, and the caller's functions describing each distinct root
 * context and status.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_OFFSET 2147483647LL

enum { OK = 0, FAIL = -1, OTHER = 1 }; /* OTHER: outside the fast path (no exception set) */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int grow_slow(Buf *b, Py_ssize_t need) {
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + need) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    b->p = p;
    b->cap = cap;
    return OK;
}

static inline int grow(Buf *b, Py_ssize_t need) { return b->len + need <= b->cap ? OK : grow_slow(b, need); }

static inline int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n)) return FAIL;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return OK;
}

static inline int put_ch(Buf *b, char c) {
    if (grow(b, 1)) return FAIL;
    b->p[b->len++] = c;
    return OK;
}

static PyObject *as_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", b->len); }

/* ------------------------------------------------------------------------------------- JSON */
static const char HEX[] = "0123456789abcdef";

/* Bytes a JSON string must escape: control characters, the quote and the backslash. */
static const unsigned char ESCAPE[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, /* the backslash */
};

/* Whether one of the 8 bytes in x is a control character, the quote or the backslash (exact: the
 * "has a byte less than" and "has a zero byte" word tricks). */
static inline int may_escape(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t control = (x - ones * 0x20) & ~x & high;
    uint64_t q = x ^ (ones * 0x22), bs = x ^ (ones * 0x5c);
    return ((control | ((q - ones) & ~q) | ((bs - ones) & ~bs)) & high) != 0;
}

/* A str as JSON text, escaped as orjson escapes it. OTHER for text that is not UTF-8 (a lone
 * surrogate: orjson refuses it and the Python path writes it another way). */
static int json_str(Buf *b, PyObject *s) {
    const char *u;
    Py_ssize_t n;
    if (PyUnicode_IS_COMPACT_ASCII(s)) { /* the usual: the characters are the UTF-8 bytes */
        u = (const char *)PyUnicode_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    } else if ((u = PyUnicode_AsUTF8AndSize(s, &n)) == NULL) {
        PyErr_Clear();
        return OTHER;
    }
    if (grow(b, 6 * n + 2)) return FAIL; /* the longest escape is 6 bytes */
    char *o = b->p + b->len;
    *o++ = '"';
    Py_ssize_t start = 0, i = 0;
    for (; i + 8 <= n; i += 8) { /* 8 bytes at a time up to the first that may need escaping (most text has none) */
        uint64_t x;
        memcpy(&x, u + i, 8);
        if (may_escape(x)) break;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (!ESCAPE[c]) continue;
        memcpy(o, u + start, (size_t)(i - start));
        o += i - start;
        start = i + 1;
        *o++ = '\\';
        switch (c) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '\b': *o++ = 'b'; break;
            case '\t': *o++ = 't'; break;
            case '\n': *o++ = 'n'; break;
            case '\f': *o++ = 'f'; break;
            case '\r': *o++ = 'r'; break;
            default:
                *o++ = 'u'; *o++ = '0'; *o++ = '0'; *o++ = HEX[c >> 4]; *o++ = HEX[c & 15];
        }
    }
    memcpy(o, u + start, (size_t)(n - start));
    o += n - start;
    *o++ = '"';
    b->len = o - b->p;
    return OK;
}

static int json_int(Buf *b, PyObject *v) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return OTHER; /* past int64: the Python path */
    if (x == -1 && PyErr_Occurred()) return FAIL;
    char tmp[24];
    int k = sizeof tmp;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) tmp[--k] = '-';
    return put(b, tmp + k, (Py_ssize_t)sizeof tmp - k);
}

static int json_float(Buf *b, PyObject *v, PyObject *dumps) {
    PyObject *out = PyObject_CallOneArg(dumps, v);
    if (out == NULL) {
        PyErr_Clear();
        return OTHER;
    }
    if (!PyBytes_Check(out)) {
        Py_DECREF(out);
        return OTHER;
    }
    int r = put(b, PyBytes_AS_STRING(out), PyBytes_GET_SIZE(out));
    Py_DECREF(out);
    return r;
}

/* A scalar (exact str, bool, int, float) or, when ``none_ok``, None. */
static int json_scalar(Buf *b, PyObject *v, PyObject *dumps, int none_ok) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyUnicode_Type) return json_str(b, v);
    if (v == Py_True) return put(b, "true", 4);
    if (v == Py_False) return put(b, "false", 5);
    if (t == &PyLong_Type) return json_int(b, v);
    if (t == &PyFloat_Type) return json_float(b, v, dumps);
    if (v == Py_None && none_ok) return put(b, "null", 4);
    return OTHER;
}

/* One attribute value. ``clean``: the dict was cleaned already (values as the SDK keeps them,
 * sequences of scalars); else it is cleaned here: a list or tuple must hold str only (the Python
 * rule turns anything else into str, which is left to it). */
static int json_value(Buf *b, PyObject *v, PyObject *dumps, int clean) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyList_Type || t == &PyTuple_Type) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
        PyObject **items = PySequence_Fast_ITEMS(v);
        if (put_ch(b, '[')) return FAIL;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i && put_ch(b, ',')) return FAIL;
            PyObject *x = items[i];
            int r = clean ? json_scalar(b, x, dumps, 1)
                          : (Py_TYPE(x) == &PyUnicode_Type ? json_str(b, x) : OTHER);
            if (r) return r;
        }
        return put_ch(b, ']');
    }
    return json_scalar(b, v, dumps, clean);
}

/* A dict of attributes as orjson writes it after cleaning (None values left out unless clean). */
static int json_dict(Buf *b, PyObject *d, PyObject *dumps, int clean) {
    if (Py_TYPE(d) != &PyDict_Type) return OTHER;
    if (PyDict_GET_SIZE(d) == 0) return put(b, "{}", 2);
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1;
    if (put_ch(b, '{')) return FAIL;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (v == Py_None && !clean) continue;
        if (Py_TYPE(k) != &PyUnicode_Type) return OTHER;
        if (!first && put_ch(b, ',')) return FAIL;
        first = 0;
        int r = json_str(b, k);
        if (r) return r;
        if (put_ch(b, ':')) return FAIL;
        r = json_value(b, v, dumps, clean);
        if (r) return r;
    }
    return put_ch(b, '}');
}

/* ---------------------------------------------------------------------------------- columns */
/* A column being built: validity bits, then offsets + data (strings) or data (int64, bool). */
typedef struct {
    char kind; /* 's' string, 'i' int64, 'b' bool */
    Py_ssize_t n, nulls;
    unsigned char *valid; /* n bits, 1 = present */
    int32_t *offsets;     /* strings: n + 1 */
    Buf data;             /* strings: UTF-8; int64: 8 bytes each; bool: n bits */
} Col;

static void col_free(Col *c) {
    PyMem_Free(c->valid);
    PyMem_Free(c->offsets);
    PyMem_Free(c->data.p);
    memset(c, 0, sizeof *c);
}

static int col_init(Col *c, char kind, Py_ssize_t n) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->n = n;
    c->valid = PyMem_Calloc((size_t)(n + 7) / 8 + 1, 1);
    if (c->valid == NULL) goto nomem;
    if (kind == 's') {
        c->offsets = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
        if (c->offsets == NULL) goto nomem;
    } else if (grow(&c->data, kind == 'i' ? 8 * n + 8 : (n + 7) / 8 + 1)) {
        col_free(c);
        return FAIL;
    } else {
        memset(c->data.p, 0, (size_t)c->data.cap);
        c->data.len = kind == 'i' ? 8 * n : (n + 7) / 8;
    }
    return OK;
nomem:
    col_free(c);
    PyErr_NoMemory();
    return FAIL;
}

static inline void set_bit(unsigned char *bits, Py_ssize_t i) { bits[i >> 3] |= (unsigned char)(1u << (i & 7)); }

/* Row i of a string column: ``s`` (an exact str) or NULL for a null. */
static int col_str(Col *c, Py_ssize_t i, PyObject *s) {
    if (s == NULL) {
        c->nulls++;
    } else {
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(s, &n);
        if (u == NULL) {
            PyErr_Clear();
            return OTHER;
        }
        if (put(&c->data, u, n)) return FAIL;
        set_bit(c->valid, i);
    }
    if (c->data.len > MAX_OFFSET) return OTHER; /* the Python path says why */
    c->offsets[i + 1] = (int32_t)c->data.len;
    return OK;
}

static void col_int(Col *c, Py_ssize_t i, long long x) {
    memcpy(c->data.p + 8 * i, &x, 8);
    set_bit(c->valid, i);
}

/* (validity bytes or None, null count, offsets bytes, data bytes) for a string column;
 * (validity or None, null count, data bytes) for int64 and bool. */
static PyObject *col_result(Col *c) {
    PyObject *valid;
    if (c->nulls) {
        valid = PyBytes_FromStringAndSize((const char *)c->valid, (c->n + 7) / 8);
        if (valid == NULL) return NULL;
    } else {
        valid = Py_NewRef(Py_None);
    }
    PyObject *data = as_bytes(&c->data);
    if (data == NULL) {
        Py_DECREF(valid);
        return NULL;
    }
    if (c->kind != 's') return Py_BuildValue("(NnN)", valid, c->nulls, data);
    PyObject *offsets = PyBytes_FromStringAndSize((const char *)c->offsets, (c->n + 1) * (Py_ssize_t)sizeof(int32_t));
    if (offsets == NULL) {
        Py_DECREF(valid);
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NnNN)", valid, c->nulls, offsets, data);
}

/* d[key] (borrowed), NULL when missing or None; sets *err on a failed lookup. */
static PyObject *get(PyObject *d, PyObject *key, int *err) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) *err = 1;
    return v == Py_None ? NULL : v;
}

static int in_int64(PyObject *v, long long *out) {
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return 0;
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

#define MAX_PROMOTED 32

/* The attribute columns of a chunk being built: JSON, session_id, seq and the promoted ones. */
typedef struct {
    Py_ssize_t n, np, ready;
    PyObject *k1, *k2, *seq_key, *dumps; /* borrowed */
    PyObject *pkeys[MAX_PROMOTED];       /* borrowed */
    Buf json;
    int32_t *ends;
    Col session, seq, cols[MAX_PROMOTED];
} Attrs;

static void attrs_free(Attrs *a) {
    PyMem_Free(a->json.p);
    PyMem_Free(a->ends);
    col_free(&a->session);
    col_free(&a->seq);
    for (Py_ssize_t j = 0; j < a->ready; j++) col_free(&a->cols[j]);
    a->ready = 0;
    a->json.p = NULL;
    a->ends = NULL;
}

/* From the arguments (session_keys, seq_key, promoted, dumps); FAIL with an exception set. */
static int attrs_init(Attrs *a, Py_ssize_t n, PyObject *session_keys, PyObject *seq_key, PyObject *promoted,
                      PyObject *dumps) {
    memset(a, 0, sizeof *a);
    Py_ssize_t np = PyTuple_GET_SIZE(promoted);
    if (PyTuple_GET_SIZE(session_keys) != 2 || np > MAX_PROMOTED) {
        PyErr_SetString(PyExc_ValueError, "two session keys and at most 32 promoted columns");
        return FAIL;
    }
    a->n = n;
    a->np = np;
    a->k1 = PyTuple_GET_ITEM(session_keys, 0);
    a->k2 = PyTuple_GET_ITEM(session_keys, 1);
    a->seq_key = seq_key;
    a->dumps = dumps;
    char kinds[MAX_PROMOTED];
    for (Py_ssize_t j = 0; j < np; j++) {
        const char *kind;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(promoted, j), "Us", &a->pkeys[j], &kind)) return FAIL;
        if (kind[0] != 's' && kind[0] != 'i' && kind[0] != 'b') {
            PyErr_SetString(PyExc_ValueError, "a promoted column is 's', 'i' or 'b'");
            return FAIL;
        }
        kinds[j] = kind[0];
    }
    a->ends = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    if (a->ends == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    if (col_init(&a->session, 's', n) || col_init(&a->seq, 'i', n)) return FAIL;
    for (; a->ready < np; a->ready++)
        if (col_init(&a->cols[a->ready], kinds[a->ready], n)) return FAIL;
    return OK;
}

/* Row i: the attribute dict ``d`` (``clean``: cleaned already). */
static int attrs_row(Attrs *a, Py_ssize_t i, PyObject *d, int clean) {
    int r = json_dict(&a->json, d, a->dumps, clean), err = 0;
    if (r) return r;
    if (a->json.len > MAX_OFFSET) return OTHER;
    a->ends[i + 1] = (int32_t)a->json.len;
    /* session_id: the first key present; an int, float or bool id as its str() */
    PyObject *sid = get(d, a->k1, &err);
    if (sid == NULL && !err) sid = get(d, a->k2, &err);
    if (err) return FAIL;
    if (sid != NULL && Py_TYPE(sid) != &PyUnicode_Type) {
        PyTypeObject *t = Py_TYPE(sid);
        if (t != &PyLong_Type && t != &PyFloat_Type && t != &PyBool_Type) return OTHER;
        PyObject *text = PyObject_Str(sid);
        if (text == NULL) return FAIL;
        r = col_str(&a->session, i, text);
        Py_DECREF(text);
    } else {
        r = col_str(&a->session, i, sid);
    }
    if (r) return r;
    /* seq: an int (not a bool); past int64 the Python path raises as it always has */
    PyObject *sq = get(d, a->seq_key, &err);
    if (err) return FAIL;
    if (sq != NULL && Py_TYPE(sq) == &PyLong_Type) {
        long long x;
        if (!in_int64(sq, &x)) return OTHER;
        col_int(&a->seq, i, x);
    } else {
        a->seq.nulls++;
    }
    /* the promoted columns: the value when it has the column's exact type, else null */
    for (Py_ssize_t j = 0; j < a->np; j++) {
        Col *c = &a->cols[j];
        PyObject *v = get(d, a->pkeys[j], &err);
        if (err) return FAIL;
        PyTypeObject *t = v == NULL ? NULL : Py_TYPE(v);
        long long x;
        if (c->kind == 's') {
            r = col_str(c, i, t == &PyUnicode_Type ? v : NULL);
            if (r) return r;
        } else if (c->kind == 'i' && t == &PyLong_Type && in_int64(v, &x)) {
            col_int(c, i, x);
        } else if (c->kind == 'b' && t == &PyBool_Type) {
            set_bit(c->valid, i);
            if (v == Py_True) set_bit((unsigned char *)c->data.p, i);
        } else {
            c->nulls++;
        }
    }
    return OK;
}

/* ((json data, json offsets), session, seq, [promoted...]) */
static PyObject *attrs_result(Attrs *a) {
    PyObject *data = as_bytes(&a->json);
    if (data == NULL) return NULL;
    PyObject *json_out = Py_BuildValue("(Ny#)", data, (const char *)a->ends, (a->n + 1) * (Py_ssize_t)sizeof(int32_t));
    PyObject *promoted_out = PyList_New(a->np);
    PyObject *s_out = col_result(&a->session), *q_out = col_result(&a->seq);
    if (json_out == NULL || promoted_out == NULL || s_out == NULL || q_out == NULL) goto fail;
    for (Py_ssize_t j = 0; j < a->np; j++) {
        PyObject *c = col_result(&a->cols[j]);
        if (c == NULL) goto fail;
        PyList_SET_ITEM(promoted_out, j, c);
    }
    return Py_BuildValue("(NNNN)", json_out, s_out, q_out, promoted_out);
fail:
    Py_XDECREF(json_out);
    Py_XDECREF(promoted_out);
    Py_XDECREF(s_out);
    Py_XDECREF(q_out);
    return NULL;
}

/* ------------------------------------------------------------------------------ span events */
static PyObject *S_NAME, *S_TIMESTAMP, *S_ATTRIBUTES; /* "_name", "_timestamp", "_attributes" (interned) */

/* An attribute of an SDK Event (a new reference), or NULL with no exception set: OTHER. */
static PyObject *slot(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) PyErr_Clear();
    return v;
}

/* A span's events as JSON text, as orjson writes the Python path's list of
 * {"name": ..., "time_ns": ..., "attributes": {...}} (tracer.store.rows._events_json). An event is a
 * held event (a (name, time, attributes) tuple: tracer.contract.records.HeldEvent) or an SDK Event
 * (its slots read directly), its attributes a plain dict as every session writes them (values as the
 * SDK stores them); anything else: OTHER. */
static int json_events(Buf *b, PyObject *events, PyObject *dumps) {
    Py_ssize_t n = PyTuple_GET_SIZE(events);
    if (n == 0) return put(b, "[]", 2);
    if (put_ch(b, '[')) return FAIL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(events, i);
        PyObject *name = NULL, *ts = NULL, *attrs = NULL;
        int r = OTHER;
        if (PyTuple_CheckExact(e)) { /* a held event */
            if (PyTuple_GET_SIZE(e) != 3) goto done;
            name = Py_NewRef(PyTuple_GET_ITEM(e, 0));
            ts = Py_NewRef(PyTuple_GET_ITEM(e, 1));
            attrs = Py_NewRef(PyTuple_GET_ITEM(e, 2));
        } else if ((name = slot(e, S_NAME)) == NULL || (ts = slot(e, S_TIMESTAMP)) == NULL ||
                   (attrs = slot(e, S_ATTRIBUTES)) == NULL) {
            goto done;
        }
        if (Py_TYPE(name) != &PyUnicode_Type || Py_TYPE(ts) != &PyLong_Type) goto done;
        if (attrs != Py_None && Py_TYPE(attrs) != &PyDict_Type) goto done;
        if ((r = put(b, i ? ",{\"name\":" : "{\"name\":", i ? 9 : 8))) goto done;
        if ((r = json_str(b, name))) goto done;
        if ((r = put(b, ",\"time_ns\":", 11))) goto done;
        if ((r = json_int(b, ts))) goto done;
        if ((r = put(b, ",\"attributes\":", 14))) goto done;
        r = attrs == Py_None ? put(b, "{}", 2) : json_dict(b, attrs, dumps, 1);
        if (r == OK) r = put_ch(b, '}');
    done:
        Py_XDECREF(name);
        Py_XDECREF(ts);
        Py_XDECREF(attrs);
        if (r) return r;
    }
    return put_ch(b, ']');
}

/* Row i of the events column: the record's events as JSON. */
static int col_events(Col *c, Py_ssize_t i, PyObject *events, PyObject *dumps) {
    int r = json_events(&c->data, events, dumps);
    if (r) return r;
    if (c->data.len > MAX_OFFSET) return OTHER;
    set_bit(c->valid, i);
    c->offsets[i + 1] = (int32_t)c->data.len;
    return OK;
}

/* -------------------------------------------------------------------------- whole records */
/* Record layout (tracer.spans.records.RECORD_FIELDS) */
enum { R_NAME, R_SPAN, R_PARENT, R_KIND, R_ATTRS, R_CLEAN, R_START, R_END, R_STATUS, R_LINKS, R_EVENTS, R_CTX,
       R_META, R_FIELDS };

#define MAX_SEEN 64

/* Per distinct object of a chunk (span contexts, statuses): what a Python function said of it. */
typedef struct {
    Py_ssize_t count;
    PyObject *key[MAX_SEEN];   /* borrowed (the records hold them) */
    PyObject *value[MAX_SEEN]; /* owned: a 2-tuple of str / None */
    Py_ssize_t last;
} Seen;

static void seen_free(Seen *s) {
    for (Py_ssize_t i = 0; i < s->count; i++) Py_DECREF(s->value[i]);
    s->count = 0;
}

/* The (a, b) ``describe(obj)`` gave for ``obj``, asked once per object; OTHER past MAX_SEEN objects or
 * when it is not a 2-tuple of str or None. */
static int seen_get(Seen *s, PyObject *obj, PyObject *describe, PyObject **a, PyObject **b) {
    Py_ssize_t hit = -1;
    if (s->count && s->key[s->last] == obj) {
        hit = s->last;
    } else {
        for (Py_ssize_t i = 0; i < s->count; i++)
            if (s->key[i] == obj) {
                hit = i;
                break;
            }
    }
    if (hit < 0) {
        if (s->count == MAX_SEEN) return OTHER;
        PyObject *v = PyObject_CallOneArg(describe, obj);
        if (v == NULL) return FAIL;
        if (!PyTuple_CheckExact(v) || PyTuple_GET_SIZE(v) != 2) {
            Py_DECREF(v);
            return OTHER;
        }
        for (int k = 0; k < 2; k++) {
            PyObject *x = PyTuple_GET_ITEM(v, k);
            if (x != Py_None && !PyUnicode_CheckExact(x)) {
                Py_DECREF(v);
                return OTHER;
            }
        }
        hit = s->count++;
        s->key[hit] = obj;
        s->value[hit] = v;
    }
    s->last = hit;
    *a = PyTuple_GET_ITEM(s->value[hit], 0);
    *b = PyTuple_GET_ITEM(s->value[hit], 1);
    return OK;
}

static void put_hex(char *p, const unsigned char *raw, int nbytes) {
    for (int k = 0; k < nbytes; k++) {
        unsigned char byte = raw[nbytes - 1 - k];
        p[2 * k] = HEX[byte >> 4];
        p[2 * k + 1] = HEX[byte & 15];
    }
}

/* An id (an int in [0, 2**64)) as 16 hex digits at p; OTHER for anything else. */
static int hex16(char *p, PyObject *v) {
    if (Py_TYPE(v) != &PyLong_Type) return OTHER;
    unsigned char raw[8];
#if PY_VERSION_HEX >= 0x030D0000
    if (_PyLong_AsByteArray((PyLongObject *)v, raw, 8, 1, 0, 1) < 0) {
#else
    if (_PyLong_AsByteArray((PyLongObject *)v, raw, 8, 1, 0) < 0) {
#endif
        PyErr_Clear();
        return OTHER;
    }
    put_hex(p, raw, 8);
    return OK;
}

PyDoc_STRVAR(record_columns_doc,
"record_columns(records, kind_names, session_keys, seq_key, promoted, dumps, context_of, status_of)\n--\n\n"
"Every column of a chunk of span records as Arrow buffers, or None (the caller then takes the Python path).\n"
"``kind_names``: ((SpanKind member, its name), ...). ``context_of(ctx)``: (the trace id as 32 hex digits,\n"
"the trace state header or None), asked once per distinct root context; ``status_of(status)``: (code name,\n"
"description or None), once per distinct status. The records must share one ``meta``. Returns\n"
"(trace_ids, span_ids, parents, states, names, kinds, starts, ends, codes, messages, events, attributes, has_links):\n"
"``events``: each record's span events as JSON; ``attributes``: ((json data, json offsets), session, seq, [promoted...]);\n"
"``has_links``: some record has links (their column is the caller's).");

static PyObject *record_columns(PyObject *self, PyObject *args) {
    PyObject *recs, *kind_names, *session_keys, *seq_key, *promoted, *dumps, *context_of, *status_of;
    if (!PyArg_ParseTuple(args, "O!O!O!UO!OOO", &PyList_Type, &recs, &PyTuple_Type, &kind_names, &PyTuple_Type,
                          &session_keys, &seq_key, &PyTuple_Type, &promoted, &dumps, &context_of, &status_of))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(recs), nk = PyTuple_GET_SIZE(kind_names);
    PyObject *kinds[8], *kind_text[8];
    if (nk > 8) {
        PyErr_SetString(PyExc_ValueError, "record_columns: at most 8 span kinds");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nk; k++)
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(kind_names, k), "OU", &kinds[k], &kind_text[k])) return NULL;
    Attrs a;
    Seen ctxs = {0}, statuses = {0};
    Col trace_ids, span_ids, parents, states, names, kind_col, starts, ends, codes, messages, events;
    Col *all[] = {&trace_ids, &span_ids, &parents, &states, &names, &kind_col, &starts, &ends, &codes, &messages,
                  &events};
    const char col_kinds[] = {'h', 'h', 'h', 's', 's', 's', 'i', 'i', 's', 's', 's'};
    const int ncols = 11;
    for (int c = 0; c < ncols; c++) memset(all[c], 0, sizeof(Col));
    PyObject *result = NULL, *meta = NULL;
    int links = 0;
    int r = attrs_init(&a, n, session_keys, seq_key, promoted, dumps);
    for (int c = 0; c < ncols && r == OK; c++) {
        if (col_kinds[c] == 'h') { /* hex ids: data only (fixed width) */
            Py_ssize_t width = c == 0 ? 32 : 16;
            all[c]->kind = 'h';
            all[c]->n = n;
            all[c]->valid = PyMem_Calloc((size_t)(n + 7) / 8 + 1, 1);
            if (all[c]->valid == NULL || grow(&all[c]->data, width * n + 1)) {
                PyErr_NoMemory();
                r = FAIL;
            } else {
                all[c]->data.len = width * n;
            }
        } else {
            r = col_init(all[c], col_kinds[c], n);
        }
    }
    for (Py_ssize_t i = 0; i < n && r == OK; i++) {
        PyObject *rec = PyList_GET_ITEM(recs, i);
        if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != R_FIELDS) {
            r = OTHER;
            break;
        }
        PyObject **f = ((PyTupleObject *)rec)->ob_item;
        if (meta == NULL) meta = f[R_META];
        if (f[R_META] != meta || !PyUnicode_CheckExact(f[R_NAME]) || Py_TYPE(f[R_START]) != &PyLong_Type ||
            Py_TYPE(f[R_END]) != &PyLong_Type || !PyTuple_CheckExact(f[R_LINKS]) || !PyTuple_CheckExact(f[R_EVENTS])) {
            r = OTHER;
            break;
        }
        if (PyTuple_GET_SIZE(f[R_LINKS])) links = 1;
        /* ids */
        PyObject *tid, *state;
        if ((r = seen_get(&ctxs, f[R_CTX], context_of, &tid, &state))) break;
        if (tid == NULL || tid == Py_None || PyUnicode_GET_LENGTH(tid) != 32 || !PyUnicode_IS_COMPACT_ASCII(tid)) {
            r = OTHER;
            break;
        }
        memcpy(trace_ids.data.p + 32 * i, PyUnicode_DATA(tid), 32);
        set_bit(trace_ids.valid, i);
        if ((r = col_str(&states, i, state == Py_None ? NULL : state))) break;
        if ((r = hex16(span_ids.data.p + 16 * i, f[R_SPAN]))) break;
        set_bit(span_ids.valid, i);
        if (f[R_PARENT] == Py_None) {
            memset(parents.data.p + 16 * i, '0', 16);
            parents.nulls++;
        } else {
            if ((r = hex16(parents.data.p + 16 * i, f[R_PARENT]))) break;
            set_bit(parents.valid, i);
        }
        /* name, kind, times, status */
        if ((r = col_str(&names, i, f[R_NAME]))) break;
        PyObject *kind = NULL;
        for (Py_ssize_t k = 0; k < nk; k++)
            if (kinds[k] == f[R_KIND]) kind = kind_text[k];
        if (kind == NULL) {
            r = OTHER;
            break;
        }
        if ((r = col_str(&kind_col, i, kind))) break;
        long long t;
        if (!in_int64(f[R_START], &t)) {
            r = OTHER;
            break;
        }
        col_int(&starts, i, t);
        if (!in_int64(f[R_END], &t)) {
            r = OTHER;
            break;
        }
        col_int(&ends, i, t);
        PyObject *code, *message;
        if ((r = seen_get(&statuses, f[R_STATUS], status_of, &code, &message))) break;
        if (code == Py_None) {
            r = OTHER;
            break;
        }
        if ((r = col_str(&codes, i, code)) || (r = col_str(&messages, i, message == Py_None ? NULL : message))) break;
        /* attributes */
        int is_clean = PyObject_IsTrue(f[R_CLEAN]);
        if (is_clean < 0) {
            r = FAIL;
            break;
        }
        if ((r = attrs_row(&a, i, f[R_ATTRS], is_clean))) break;
        r = col_events(&events, i, f[R_EVENTS], dumps);
    }
    if (r == OTHER) {
        result = Py_NewRef(Py_None);
    } else if (r == OK) {
        PyObject *outs[11];
        int made = 0;
        for (; made < ncols; made++) {
            Col *c = all[made];
            if (c->kind == 'h') {
                PyObject *valid = c->nulls ? PyBytes_FromStringAndSize((const char *)c->valid, (n + 7) / 8)
                                           : Py_NewRef(Py_None);
                outs[made] = valid == NULL ? NULL : Py_BuildValue("(NnN)", valid, c->nulls, as_bytes(&c->data));
            } else {
                outs[made] = col_result(c);
            }
            if (outs[made] == NULL) break;
        }
        PyObject *attrs_out = made == ncols ? attrs_result(&a) : NULL;
        if (attrs_out != NULL) {
            result = Py_BuildValue("(NNNNNNNNNNNNO)", outs[0], outs[1], outs[2], outs[3], outs[4], outs[5], outs[6],
                                   outs[7], outs[8], outs[9], outs[10], attrs_out, links ? Py_True : Py_False);
        } else {
            for (int c = 0; c < made; c++) Py_DECREF(outs[c]);
        }
    }
    attrs_free(&a);
    seen_free(&ctxs);
    seen_free(&statuses);
    for (int c = 0; c < ncols; c++) col_free(all[c]);
    return result;
}

static PyMethodDef methods[] = {
    {"record_columns", record_columns, METH_VARARGS, record_columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tracer.store._columns",
    "Store columns of span records built in C (the optional accelerator of tracer.store.rows).", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) {
    if ((S_NAME = PyUnicode_InternFromString("_name")) == NULL ||
        (S_TIMESTAMP = PyUnicode_InternFromString("_timestamp")) == NULL ||
        (S_ATTRIBUTES = PyUnicode_InternFromString("_attributes")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", 2) < 0) Py_CLEAR(m); /* what record_columns returns: rows.ACCELERATOR_API */
    return m;
}

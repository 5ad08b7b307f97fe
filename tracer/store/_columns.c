/* Store columns of span records, built in C (the optional accelerator of tracer/store/rows.py).
 *
 * Why: converting a chunk of span records to Arrow is the largest part of what tracing costs the
 * agent's thread (docs/performance.md). In Python it is a loop per attribute of every span
 * (cleaning, JSON, the promoted columns); here it is one pass over the chunk's attribute dicts
 * that writes the Arrow buffers (validity bitmap, int32 offsets, data) directly.
 *
 * The rules are the Python ones (tracer.spans.records.clean_attributes, tracer.store.rows): for a
 * dict, a value or an id outside the usual (a set, a nested dict, a str subclass, text that is not
 * UTF-8, an int past 64 bits...) the functions return None and the caller takes the Python path
 * for the whole chunk, so the two always give the same table (tests/tracer/store/test_columns.py).
 * Nothing here runs Python code except orjson.dumps for floats (to write them exactly as orjson
 * does) and str() of an int, float or bool session id.
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

static int grow(Buf *b, Py_ssize_t need) {
    if (b->len + need <= b->cap) return OK;
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

/* A str as JSON text, escaped as orjson escapes it. OTHER for text that is not UTF-8 (a lone
 * surrogate: orjson refuses it and the Python path writes it another way). */
static int json_str(Buf *b, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        PyErr_Clear();
        return OTHER;
    }
    if (grow(b, n + 2)) return FAIL;
    b->p[b->len++] = '"';
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (put(b, u + start, i - start)) return FAIL;
        start = i + 1;
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        Py_ssize_t k = 2;
        switch (c) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\b': esc[1] = 'b'; break;
            case '\t': esc[1] = 't'; break;
            case '\n': esc[1] = 'n'; break;
            case '\f': esc[1] = 'f'; break;
            case '\r': esc[1] = 'r'; break;
            default:
                esc[1] = 'u'; esc[2] = '0'; esc[3] = '0'; esc[4] = HEX[c >> 4]; esc[5] = HEX[c & 15];
                k = 6;
        }
        if (put(b, esc, k)) return FAIL;
    }
    if (put(b, u + start, n - start)) return FAIL;
    return put_ch(b, '"');
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

PyDoc_STRVAR(attribute_columns_doc,
"attribute_columns(dicts, clean, session_keys, seq_key, promoted, dumps)\n--\n\n"
"The attribute columns of a chunk of span records, as Arrow buffers: (json, session, seq, [promoted...]).\n"
"``clean``: one bool per dict (True: cleaned already). ``promoted``: (key, 's'|'i'|'b') per column.\n"
"``dumps``: orjson.dumps (floats are written as it writes them). None when a value is outside the\n"
"fast path: the caller then takes the Python path for the whole chunk.");

static PyObject *attribute_columns(PyObject *self, PyObject *args) {
    PyObject *dicts, *clean, *session_keys, *seq_key, *promoted, *dumps;
    if (!PyArg_ParseTuple(args, "O!O!O!UO!O", &PyList_Type, &dicts, &PyList_Type, &clean, &PyTuple_Type,
                          &session_keys, &seq_key, &PyTuple_Type, &promoted, &dumps))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(dicts), np = PyTuple_GET_SIZE(promoted);
    if (PyList_GET_SIZE(clean) != n || PyTuple_GET_SIZE(session_keys) != 2 || np > MAX_PROMOTED) {
        PyErr_SetString(PyExc_ValueError, "attribute_columns: mismatched arguments");
        return NULL;
    }
    PyObject *k1 = PyTuple_GET_ITEM(session_keys, 0), *k2 = PyTuple_GET_ITEM(session_keys, 1);
    PyObject *pkeys[MAX_PROMOTED];
    char pkinds[MAX_PROMOTED];
    for (Py_ssize_t j = 0; j < np; j++) {
        PyObject *spec = PyTuple_GET_ITEM(promoted, j);
        const char *kind;
        if (!PyArg_ParseTuple(spec, "Us", &pkeys[j], &kind)) return NULL;
        pkinds[j] = kind[0];
        if (kind[0] != 's' && kind[0] != 'i' && kind[0] != 'b') {
            PyErr_SetString(PyExc_ValueError, "attribute_columns: a promoted column is 's', 'i' or 'b'");
            return NULL;
        }
    }
    Buf json = {0};
    int32_t *ends = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    Col session, seq, cols[MAX_PROMOTED];
    Py_ssize_t ready = 0;
    int r = OK, err = 0;
    PyObject *result = NULL;
    memset(&session, 0, sizeof session);
    memset(&seq, 0, sizeof seq);
    if (ends == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (col_init(&session, 's', n) || col_init(&seq, 'i', n)) goto done;
    for (; ready < np; ready++)
        if (col_init(&cols[ready], pkinds[ready], n)) goto done;

    for (Py_ssize_t i = 0; i < n && r == OK; i++) {
        PyObject *d = PyList_GET_ITEM(dicts, i);
        int is_clean = PyObject_IsTrue(PyList_GET_ITEM(clean, i));
        if (is_clean < 0) goto done;
        r = json_dict(&json, d, dumps, is_clean);
        if (r) break;
        if (json.len > MAX_OFFSET) {
            r = OTHER;
            break;
        }
        ends[i + 1] = (int32_t)json.len;
        /* session_id: the first key present; an int, float or bool id as its str() */
        PyObject *sid = get(d, k1, &err);
        if (sid == NULL && !err) sid = get(d, k2, &err);
        if (err) goto done;
        if (sid != NULL && Py_TYPE(sid) != &PyUnicode_Type) {
            PyTypeObject *t = Py_TYPE(sid);
            if (t != &PyLong_Type && t != &PyFloat_Type && t != &PyBool_Type) {
                r = OTHER;
                break;
            }
            PyObject *text = PyObject_Str(sid);
            if (text == NULL) goto done;
            r = col_str(&session, i, text);
            Py_DECREF(text);
        } else {
            r = col_str(&session, i, sid);
        }
        if (r) break;
        /* seq: an int (not a bool); past int64 the Python path raises as it always has */
        PyObject *sq = get(d, seq_key, &err);
        if (err) goto done;
        if (sq != NULL && Py_TYPE(sq) == &PyLong_Type) {
            long long x;
            if (!in_int64(sq, &x)) {
                r = OTHER;
                break;
            }
            col_int(&seq, i, x);
        } else {
            seq.nulls++;
        }
        /* the promoted columns: the value when it has the column's exact type, else null */
        for (Py_ssize_t j = 0; j < np; j++) {
            Col *c = &cols[j];
            PyObject *v = get(d, pkeys[j], &err);
            if (err) goto done;
            PyTypeObject *t = v == NULL ? NULL : Py_TYPE(v);
            long long x;
            if (c->kind == 's') {
                r = col_str(c, i, t == &PyUnicode_Type ? v : NULL);
                if (r) break;
            } else if (c->kind == 'i' && t == &PyLong_Type && in_int64(v, &x)) {
                col_int(c, i, x);
            } else if (c->kind == 'b' && t == &PyBool_Type) {
                set_bit(c->valid, i);
                if (v == Py_True) set_bit((unsigned char *)c->data.p, i);
            } else {
                c->nulls++;
            }
        }
    }
    if (r == FAIL) goto done;
    if (r == OTHER) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    {
        PyObject *json_out = Py_BuildValue("(Ny#)", as_bytes(&json), (const char *)ends,
                                           (n + 1) * (Py_ssize_t)sizeof(int32_t));
        PyObject *promoted_out = PyList_New(np);
        PyObject *s_out = col_result(&session), *q_out = col_result(&seq);
        if (json_out == NULL || promoted_out == NULL || s_out == NULL || q_out == NULL) {
            Py_XDECREF(json_out);
            Py_XDECREF(promoted_out);
            Py_XDECREF(s_out);
            Py_XDECREF(q_out);
            goto done;
        }
        for (Py_ssize_t j = 0; j < np; j++) {
            PyObject *c = col_result(&cols[j]);
            if (c == NULL) {
                Py_DECREF(json_out);
                Py_DECREF(promoted_out);
                Py_DECREF(s_out);
                Py_DECREF(q_out);
                goto done;
            }
            PyList_SET_ITEM(promoted_out, j, c);
        }
        result = Py_BuildValue("(NNNN)", json_out, s_out, q_out, promoted_out);
    }
done:
    PyMem_Free(json.p);
    PyMem_Free(ends);
    col_free(&session);
    col_free(&seq);
    for (Py_ssize_t j = 0; j < ready; j++) col_free(&cols[j]);
    return result;
}

PyDoc_STRVAR(hex_ids_doc,
"hex_ids(values, width)\n--\n\n"
"Ids (int or None) as lowercase hex of ``width`` digits, back to back: (validity or None, null\n"
"count, data); a null's digits are zeros. None when an id is not an int in [0, 16**width).");

static PyObject *hex_ids(PyObject *self, PyObject *args) {
    PyObject *values;
    int width;
    if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &values, &width)) return NULL;
    if (width <= 0 || width > 32 || width % 16) {
        PyErr_SetString(PyExc_ValueError, "hex_ids: width is 16 or 32");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values), nulls = 0;
    PyObject *data = PyBytes_FromStringAndSize(NULL, n * width);
    unsigned char *valid = PyMem_Calloc((size_t)(n + 7) / 8 + 1, 1);
    if (data == NULL || valid == NULL) {
        Py_XDECREF(data);
        PyMem_Free(valid);
        return valid == NULL ? PyErr_NoMemory() : NULL;
    }
    char *out = PyBytes_AS_STRING(data);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        char *p = out + i * width;
        if (v == Py_None) {
            memset(p, '0', (size_t)width);
            nulls++;
            continue;
        }
        if (Py_TYPE(v) != &PyLong_Type) goto other;
        unsigned char raw[16];
        /* little-endian, unsigned: fails (OverflowError/negative) outside [0, 2**(8*width/2)) */
#if PY_VERSION_HEX >= 0x030D0000
        if (_PyLong_AsByteArray((PyLongObject *)v, raw, (size_t)width / 2, 1, 0, 1) < 0) {
#else
        if (_PyLong_AsByteArray((PyLongObject *)v, raw, (size_t)width / 2, 1, 0) < 0) {
#endif
            PyErr_Clear();
            goto other;
        }
        for (int k = 0; k < width / 2; k++) {
            unsigned char byte = raw[width / 2 - 1 - k];
            p[2 * k] = HEX[byte >> 4];
            p[2 * k + 1] = HEX[byte & 15];
        }
        set_bit(valid, i);
    }
    PyObject *v_out = nulls ? PyBytes_FromStringAndSize((const char *)valid, (n + 7) / 8) : Py_NewRef(Py_None);
    PyMem_Free(valid);
    if (v_out == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NnN)", v_out, nulls, data);
other:
    Py_DECREF(data);
    PyMem_Free(valid);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"attribute_columns", attribute_columns, METH_VARARGS, attribute_columns_doc},
    {"hex_ids", hex_ids, METH_VARARGS, hex_ids_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tracer.store._columns",
    "Store columns of span records built in C (the optional accelerator of tracer.store.rows).", -1, methods,
};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }

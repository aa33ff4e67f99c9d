/* A fetch's records as the lines one decoding step takes, in one native call: live.py's
`_plain` and the byte checks of decode.py's `lines_admitted` and `_decoded`, together.

The live worker does this for every record it fetches: in Python it was a loop over records
and three maps and a join over their lines (bench/RESULTS.md). live.py's `_plain` stays the
reference and the fallback where this is not built; tests/unit/stream/test_fetched.py holds
the two to the same answer on every input it makes, hostile ones included. What this vouches
for is bytes only -- decoding, the time stamps and the patterns stay decode.py's -- and where
it cannot vouch it answers None, as `_plain` does: then each record is decoded alone. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *str_value, *str_headers, *str_timestamp, *str_offset, *thousand;

/* JSON's space after a value (decode.py `_JSON_SPACE`: `rstrip` would take more) */
static inline int
json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* bytes.isspace's set */
static inline int
space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c';
}

typedef struct {
    PyObject *lines, *arrivals, *offsets, *numbers; /* the columns, one entry a line */
    Py_ssize_t joined;                              /* the joined text's length so far */
    int plain;                                      /* every line vouched for so far */
} Columns;

/* One line of a record: its columns appended; whether it is plain, seen from its bytes
   (`{...}` once JSON space is stripped from its end, ASCII, no backslash, no DEL, not too
   large). */
static int
add_line(Columns *c, PyObject *line, PyObject *arrival, PyObject *offset, Py_ssize_t number,
         Py_ssize_t max_bytes)
{
    const char *p = PyBytes_AS_STRING(line);
    Py_ssize_t n = PyBytes_GET_SIZE(line), end = n;
    while (end > 0 && json_space(p[end - 1]))
        end--;
    if (n > max_bytes || end < 1 || p[0] != '{' || p[end - 1] != '}') {
        c->plain = 0;
        return 0;
    }
    /* every byte looked at, no early exit: the compiler makes this loop vector code (a
       plain line is the common case, and it reads to the end anyway) */
    const unsigned char *u = (const unsigned char *)p;
    unsigned char odd = 0;
    for (Py_ssize_t i = 0; i < end; i++)
        odd |= (unsigned char)((u[i] >= 0x7f) | (u[i] == '\\'));
    if (odd) {
        c->plain = 0;
        return 0;
    }
    c->joined += end + 1;
    PyObject *num = PyLong_FromSsize_t(number);
    if (num == NULL)
        return -1;
    int bad = PyList_Append(c->lines, line) < 0 || PyList_Append(c->arrivals, arrival) < 0
              || PyList_Append(c->offsets, offset) < 0 || PyList_Append(c->numbers, num) < 0;
    Py_DECREF(num);
    return bad ? -1 : 0;
}

/* A batch record's lines, blank ones left out (records.py `lines_of`). */
static int
add_batch(Columns *c, PyObject *value, PyObject *arrival, PyObject *offset, Py_ssize_t max_bytes)
{
    const char *p = PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value), start = 0, number = 0;
    while (start <= n && c->plain) {
        const char *nl = memchr(p + start, '\n', (size_t)(n - start));
        Py_ssize_t end = nl == NULL ? n : nl - p;
        int blank = 1;
        for (Py_ssize_t i = start; blank && i < end; i++)
            blank = space(p[i]);
        if (!blank) {
            PyObject *line = PyBytes_FromStringAndSize(p + start, end - start);
            if (line == NULL)
                return -1;
            int got = add_line(c, line, arrival, offset, ++number, max_bytes);
            Py_DECREF(line);
            if (got < 0)
                return -1;
        }
        start = end + 1;
    }
    return 0;
}

/* The lines joined by newlines, each with its JSON space stripped from its end. */
static PyObject *
joined(Columns *c)
{
    Py_ssize_t size = c->joined - 1, at = 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    char *q = PyBytes_AS_STRING(out);
    Py_ssize_t count = PyList_GET_SIZE(c->lines);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *line = PyList_GET_ITEM(c->lines, k);
        const char *p = PyBytes_AS_STRING(line);
        Py_ssize_t end = PyBytes_GET_SIZE(line);
        while (end > 0 && json_space(p[end - 1]))
            end--;
        if (k)
            q[at++] = '\n';
        memcpy(q + at, p, (size_t)end);
        at += end;
    }
    return out;
}

/* plain(records, emitted, is_batch, max_bytes) -> (joined, lines, arrivals, offsets,
   numbers) or None */
static PyObject *
plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "plain(records, emitted, is_batch, max_bytes)");
        return NULL;
    }
    PyObject *records = args[0], *emitted = args[1], *is_batch = args[2];
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[3]);
    if (max_bytes == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "records must be a list");
        return NULL;
    }
    Columns c = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), 0, 1};
    PyObject *out = NULL, *value = NULL, *headers = NULL, *stamp = NULL, *offset = NULL;
    PyObject *arrival = NULL;
    if (c.lines == NULL || c.arrivals == NULL || c.offsets == NULL || c.numbers == NULL)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(records);
    for (Py_ssize_t k = 0; k < n && c.plain; k++) {
        PyObject *record = PyList_GET_ITEM(records, k);
        if ((value = PyObject_GetAttr(record, str_value)) == NULL
            || (headers = PyObject_GetAttr(record, str_headers)) == NULL
            || (stamp = PyObject_GetAttr(record, str_timestamp)) == NULL
            || (offset = PyObject_GetAttr(record, str_offset)) == NULL)
            goto done;
        if (!PyBytes_CheckExact(value)) { /* (no value, or not bytes: decided one by one) */
            c.plain = 0;
            break;
        }
        /* the broker's time in ms, as seconds (`record.timestamp / 1000.0`) */
        if ((arrival = PyNumber_TrueDivide(stamp, thousand)) == NULL)
            goto done;
        int batch = PyObject_IsTrue(headers);
        if (batch > 0) { /* (`headers and is_batch(headers)`; nearly every one the emitted) */
            batch = PyObject_RichCompareBool(headers, emitted, Py_EQ);
            if (batch == 0) {
                PyObject *said = PyObject_CallOneArg(is_batch, headers);
                if (said == NULL)
                    goto done;
                batch = PyObject_IsTrue(said);
                Py_DECREF(said);
            }
        }
        if (batch < 0)
            goto done;
        if ((batch ? add_batch(&c, value, arrival, offset, max_bytes)
                   : add_line(&c, value, arrival, offset, 0, max_bytes)) < 0)
            goto done;
        Py_CLEAR(value);
        Py_CLEAR(headers);
        Py_CLEAR(stamp);
        Py_CLEAR(offset);
        Py_CLEAR(arrival);
    }
    if (!c.plain || PyList_GET_SIZE(c.lines) == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *text = joined(&c);
    if (text != NULL)
        out = PyTuple_Pack(5, text, c.lines, c.arrivals, c.offsets, c.numbers);
    Py_XDECREF(text);
done:
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(stamp);
    Py_XDECREF(offset);
    Py_XDECREF(arrival);
    Py_XDECREF(c.lines);
    Py_XDECREF(c.arrivals);
    Py_XDECREF(c.offsets);
    Py_XDECREF(c.numbers);
    return out;
}

static PyMethodDef methods[] = {
    {"plain", (PyCFunction)(void (*)(void))plain, METH_FASTCALL,
     PyDoc_STR("plain(records, emitted, is_batch, max_bytes): a fetch's lines joined and "
               "their columns, or None where a record is not plain (live.py `_plain`).")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "runwatch.stream._fetched",
    .m_doc = PyDoc_STR("A fetch's records as one decoding step's lines (live.py `_plain`)."),
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__fetched(void)
{
    str_value = PyUnicode_InternFromString("value");
    str_headers = PyUnicode_InternFromString("headers");
    str_timestamp = PyUnicode_InternFromString("timestamp");
    str_offset = PyUnicode_InternFromString("offset");
    thousand = PyFloat_FromDouble(1000.0);
    if (str_value == NULL || str_headers == NULL || str_timestamp == NULL || str_offset == NULL
        || thousand == NULL)
        return NULL;
    return PyModule_Create(&module);
}

/* A host's clock shift in one native call: `ClockOffsets.shift_held` (skew.py), its arithmetic.

The live worker runs it for every event; in Python each read of the host's array makes a
float object and each write parses one, which made it a tenth of the worker's CPU at a
fleet's rate (bench/RESULTS.md). skew.py stays the reference and the fallback where this is
not built; tests/unit/stream/test_skew_native.py holds the two to the same doubles. The host
is skew.py's `_Host`, an `array('d')` with two slots (`run`, `others`): read and written
through the buffer protocol, resized -- while its window fills, or when more seconds go than
come -- through its own methods (an exported buffer cannot resize). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* the host array's scalars (skew.py `_LAST` ...) and where its samples start (`_HEAD`) */
enum { LAST, STREAK, LOW1, LOW2, HELD, LATEST, HEAD };

typedef struct {
    PyObject_HEAD
    double gap, window, outlier;
    vectorcallfunc vectorcall;
} Shifter;

static PyObject *str_run, *str_others, *str_frombytes;

static int
doubles(PyObject *host, Py_buffer *view)
{
    if (PyObject_GetBuffer(host, view, PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != sizeof(double) || view->format == NULL || strcmp(view->format, "d")) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_TypeError, "a host must be an array of doubles");
        return -1;
    }
    return 0;
}

/* a second's three doubles appended (`held.frombytes(...)`) */
static int
append_second(PyObject *host, double second, double sample)
{
    double three[3] = {second, sample, INFINITY};
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)three, sizeof three);
    if (bytes == NULL)
        return -1;
    PyObject *got = PyObject_CallMethodOneArg(host, str_frombytes, bytes);
    Py_DECREF(bytes);
    if (got == NULL)
        return -1;
    Py_DECREF(got);
    return 0;
}

/* the two smallest samples held, read off every second's two (`_Host.rescan`) */
static void
rescan(double *h, Py_ssize_t n)
{
    double low1 = INFINITY, low2 = INFINITY;
    for (Py_ssize_t j = HEAD + 1; j < n; j += 3) {
        double a = h[j];
        if (a < low2) {
            if (a < low1) {
                double b = h[j + 1];
                low2 = low1 < b ? low1 : b;
                low1 = a;
            } else {
                low2 = a;
            }
        }
    }
    h[LOW1] = low1;
    h[LOW2] = low2;
}

/* a run's shift and latest time kept in the host's others (run -> the pair) */
static int
keep(PyObject *others, PyObject *run, double shift, double at)
{
    PyObject *value = Py_BuildValue("(dd)", shift, at);
    if (value == NULL)
        return -1;
    int got = PyDict_SetItem(others, run, value);
    Py_DECREF(value);
    return got;
}

/* The shift for one event; the run's order kept as skew.py keeps it. */
static PyObject *
shift(Shifter *self, PyObject *host, PyObject *run, double ts, double arrival, double deadband)
{
    Py_buffer view;
    if (doubles(host, &view) < 0)
        return NULL;
    double *h = view.buf;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double);
    if (n < HEAD) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a host array holds at least its scalars");
        return NULL;
    }
    double last = h[LAST];
    double sample = arrival - ts;
    /* the host's latest arrival again (a batch record's next line) */
    int again = arrival == last && n != HEAD;
    double second = 0.0;
    if (!again) {
        if (arrival - last > self->gap)
            h[STREAK] = arrival; /* the streak starts again */
        if (arrival > last)
            h[LAST] = arrival;
        second = floor(arrival);
    }
    /* a new second's three doubles go at the end (`held.frombytes`), written below: in the
       room the seconds forgotten leave where they leave some, so that a host sending about
       once a second -- a second in, a second out, nearly every event -- resizes nothing */
    int append = !again && (n == HEAD || second > h[n - 3]);
    if (!append) {
        if (sample < h[n - 2]) { /* this second (or an arrival a little out of order) */
            h[n - 1] = h[n - 2];
            h[n - 2] = sample;
        } else if (sample < h[n - 1]) {
            h[n - 1] = sample;
        }
    }
    double low1 = h[LOW1], low2 = h[LOW2];
    if (sample < low2) {
        if (sample < low1) {
            h[LOW1] = sample;
            h[LOW2] = low1;
            low2 = low1;
            low1 = sample;
        } else {
            h[LOW2] = low2 = sample;
        }
    }
    double horizon = arrival - self->window;
    /* forget the seconds before the window (the latest stays: a new one is never among
       them), rescanning only when a second forgotten held one of the two smallest */
    Py_ssize_t i = HEAD;
    int lost = 0;
    if (!again && n > HEAD && h[HEAD] < horizon && arrival - h[STREAK] >= self->window) {
        Py_ssize_t whole = n + (append ? 3 : 0);
        while (whole - i > 3 && h[i] < horizon) {
            lost = lost || h[i + 1] <= low2;
            i += 3;
        }
    }
    Py_ssize_t gone = i - HEAD; /* doubles forgotten */
    if (gone) {
        memmove(h + HEAD, h + i, (size_t)(n - i) * sizeof(double));
        n -= gone;
    }
    if (append && gone) { /* into the room they left */
        h[n] = second;
        h[n + 1] = sample;
        h[n + 2] = INFINITY;
        n += 3;
        gone -= 3;
        append = 0;
    }
    if (gone || append) {
        PyBuffer_Release(&view);
        if (gone ? PySequence_DelSlice(host, n, n + gone) < 0
                 : append_second(host, second, sample) < 0)
            return NULL;
        if (doubles(host, &view) < 0)
            return NULL;
        h = view.buf;
        n = view.len / (Py_ssize_t)sizeof(double);
    }
    if (lost) {
        rescan(h, n);
        low1 = h[LOW1];
        low2 = h[LOW2];
    }
    double estimate = low2 != INFINITY && low1 < low2 - self->outlier ? low2 : low1;
    double want = estimate > deadband || estimate < 0.0 ? estimate : 0.0;
    if (run == Py_None) {
        PyBuffer_Release(&view);
        return PyFloat_FromDouble(want);
    }
    PyObject *others = NULL; /* (a new reference where used) */
    double held_shift, latest;
    PyObject *kept_run = PyObject_GetAttr(host, str_run);
    if (kept_run == NULL)
        goto fail;
    int same = kept_run == Py_None ? 0 : PyObject_RichCompareBool(kept_run, run, Py_EQ);
    if (same < 0) {
        Py_DECREF(kept_run);
        goto fail;
    }
    if (same) { /* the run whose shifts the host keeps (nearly every event) */
        Py_DECREF(kept_run);
        held_shift = h[HELD];
        latest = h[LATEST];
    } else if (kept_run == Py_None) {
        Py_DECREF(kept_run);
        h[HELD] = want;
        h[LATEST] = ts + want;
        PyBuffer_Release(&view);
        if (PyObject_SetAttr(host, str_run, run) < 0)
            return NULL;
        return PyFloat_FromDouble(want);
    } else {
        Py_DECREF(kept_run);
        others = PyObject_GetAttr(host, str_others);
        if (others == NULL)
            goto fail;
        if (others == Py_None) {
            Py_DECREF(others);
            others = PyDict_New();
            if (others == NULL || PyObject_SetAttr(host, str_others, others) < 0)
                goto fail;
        }
        if (!PyDict_Check(others)) {
            PyErr_SetString(PyExc_TypeError, "a host's others must be a dict");
            goto fail;
        }
        PyObject *kept_last = PyDict_GetItemWithError(others, run); /* (borrowed) */
        if (kept_last == NULL) { /* the run's first event from this host */
            if (PyErr_Occurred() || keep(others, run, want, ts + want) < 0)
                goto fail;
            goto done;
        }
        if (!PyTuple_Check(kept_last) || PyTuple_GET_SIZE(kept_last) != 2) {
            PyErr_SetString(PyExc_TypeError, "a run's kept shift must be a pair");
            goto fail;
        }
        held_shift = PyFloat_AsDouble(PyTuple_GET_ITEM(kept_last, 0));
        latest = PyFloat_AsDouble(PyTuple_GET_ITEM(kept_last, 1));
        if (PyErr_Occurred())
            goto fail;
    }
    /* the shift of the run's latest event, the latest time one of them was put at */
    if (held_shift > want && ts + want < latest) { /* less would put it before an earlier one */
        double kept = held_shift < sample ? held_shift : sample; /* (not after its arrival) */
        if (kept > want)
            want = kept;
    }
    double at = ts + want;
    if (at < latest)
        at = latest;
    if (others == NULL) {
        h[HELD] = want;
        h[LATEST] = at;
    } else if (keep(others, run, want, at) < 0) {
        goto fail;
    }
done:
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return PyFloat_FromDouble(want);
fail:
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *
Shifter_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "shift takes no keyword arguments");
        return NULL;
    }
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError,
                     "shift takes 5 arguments (host, run, ts, arrival, deadband), %zd given",
                     nargs);
        return NULL;
    }
    double ts = PyFloat_AsDouble(args[2]);
    double arrival = PyFloat_AsDouble(args[3]);
    double deadband = PyFloat_AsDouble(args[4]);
    if (PyErr_Occurred())
        return NULL;
    if (args[1] != Py_None && !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "run must be a str or None");
        return NULL;
    }
    return shift((Shifter *)callable, args[0], args[1], ts, arrival, deadband);
}

static PyObject *
Shifter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"gap", "window", "outlier", NULL};
    double gap, window, outlier;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ddd", names, &gap, &window, &outlier))
        return NULL;
    Shifter *self = (Shifter *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->gap = gap;
    self->window = window;
    self->outlier = outlier;
    self->vectorcall = Shifter_vectorcall;
    return (PyObject *)self;
}

static PyTypeObject ShifterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runwatch.stream.timekeeping._skew.Shifter",
    .tp_doc = PyDoc_STR("Shifter(gap, window, outlier)(host, run, ts, arrival, deadband): "
                        "ClockOffsets.shift_held, native."),
    .tp_basicsize = sizeof(Shifter),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = Shifter_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Shifter, vectorcall),
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "runwatch.stream.timekeeping._skew",
    .m_doc = PyDoc_STR("ClockOffsets.shift_held in one native call (skew.py is the reference)."),
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__skew(void)
{
    str_run = PyUnicode_InternFromString("run");
    str_others = PyUnicode_InternFromString("others");
    str_frombytes = PyUnicode_InternFromString("frombytes");
    if (str_run == NULL || str_others == NULL || str_frombytes == NULL)
        return NULL;
    if (PyType_Ready(&ShifterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Shifter", (PyObject *)&ShifterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

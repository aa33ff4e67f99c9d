/* The duplicate-id window as 64-bit digests: `RecentIds` (tracked.py), native.

The live worker asks it twice an event (is the id new? then: remember it, forget the oldest).
As a Python set and deque of the ids it costs ~1-1.5 µs an event and ~110 bytes an id (the
strings, the set's slots, the deque): 100,000 ids a partition hold ~11 MB, most of them cold,
so each event's probe and eviction are cache misses (bench/RESULTS.md). Here an id is its
SipHash-1-3 digest under a key of the window's own (random where a window starts, kept in its
checkpoint, so no input can choose ids that collide in its table): a table of digests (linear
probing, at most half full, deletion by backward shift: no tombstones) and a ring of them in
arrival order, 8 + ~21 bytes an id. Two different ids with one digest would read as one: at
100,000 ids held, one chance in ~1.8e14 an event. tests/unit/stream/test_ids_native.py holds
it to `RecentIds` call for call. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define KEY_BYTES 16

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
#endif
#ifdef MAP_ANONYMOUS
/* arrays this big are mapped, not allocated: the kernel's zeroed pages come as the table is
   first touched, where the allocator would clear the whole of a block it reuses -- a window
   of 500,000 ids is 12 MB, and an engine that reads one file (`runwatch diagnose`, a test)
   touches a few pages of it */
#define MAPPED_BYTES ((size_t)1 << 20)
#endif

/* whether `n` 64-bit words are mapped: `zeroed` and `release` must agree */
static inline int
mapped(size_t n)
{
#ifdef MAPPED_BYTES
    return n >= MAPPED_BYTES / sizeof(uint64_t);
#else
    (void)n;
    return 0;
#endif
}

/* `n` 64-bit zeros (NULL when there is no room) */
static uint64_t *
zeroed(size_t n)
{
#ifdef MAPPED_BYTES
    if (mapped(n)) {
        void *p = mmap(NULL, n * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : (uint64_t *)p;
    }
#endif
    return PyMem_Calloc(n, sizeof(uint64_t));
}

/* gives back what `zeroed(n)` gave (NULL: nothing) */
static void
release(uint64_t *p, size_t n)
{
    if (p == NULL)
        return;
#ifdef MAPPED_BYTES
    if (mapped(n)) {
        munmap(p, n * sizeof(uint64_t));
        return;
    }
#endif
    PyMem_Free(p);
}

typedef struct {
    PyObject_HEAD
    Py_ssize_t capacity;
    uint64_t k0, k1;
    uint64_t *table; /* 0: an empty slot (a digest of 0 is stored as 1) */
    size_t mask;
    uint64_t *ring; /* the digests held, oldest at `head` */
    Py_ssize_t head, count;
    /* the id digested last and its digest: the live driver asks of an event's id, then the
       engine asks and adds it -- one digest for the three (the same str object: a str does
       not change, and the reference held keeps its address from another's) */
    PyObject *last;
    uint64_t last_digest;
} IdWindow;

static inline uint64_t
load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void
store64(uint8_t *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define HALF_ROUND(a, b, c, d, s, t) \
    a += b; c += d; b = ROTL(b, s) ^ a; d = ROTL(d, t) ^ c; a = ROTL(a, 32);
#define ROUND(v0, v1, v2, v3) \
    HALF_ROUND(v0, v1, v2, v3, 13, 16); HALF_ROUND(v2, v1, v0, v3, 17, 21);

/* SipHash-1-3, as CPython's Python/pyhash.c computes it for str and bytes */
static uint64_t
siphash13(uint64_t k0, uint64_t k1, const uint8_t *src, Py_ssize_t size)
{
    uint64_t b = (uint64_t)size << 56;
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
    uint64_t v3 = k1 ^ 0x7465646279746573ULL;
    while (size >= 8) {
        uint64_t m = load64(src);
        src += 8;
        size -= 8;
        v3 ^= m;
        ROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t t = 0;
    for (Py_ssize_t i = 0; i < size; i++)
        t |= (uint64_t)src[i] << (8 * i);
    b |= t;
    v3 ^= b;
    ROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    ROUND(v0, v1, v2, v3);
    ROUND(v0, v1, v2, v3);
    ROUND(v0, v1, v2, v3);
    return (v0 ^ v1) ^ (v2 ^ v3);
}

/* the digest of an id (a str: its UTF-8 bytes); 0 with an exception set on a non-str */
static int
digest_of(IdWindow *self, PyObject *id, uint64_t *out)
{
    if (id == self->last) {
        *out = self->last_digest;
        return 0;
    }
    if (!PyUnicode_Check(id)) {
        PyErr_Format(PyExc_TypeError, "an event id is a str, not %.80s", Py_TYPE(id)->tp_name);
        return -1;
    }
    Py_ssize_t size;
    const char *data = PyUnicode_AsUTF8AndSize(id, &size);
    uint64_t d;
    if (data != NULL) {
        d = siphash13(self->k0, self->k1, (const uint8_t *)data, size);
    } else { /* a lone surrogate: its bytes as "surrogatepass" writes them, not a failure */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            return -1;
        PyErr_Clear();
        PyObject *bytes = PyUnicode_AsEncodedString(id, "utf-8", "surrogatepass");
        if (bytes == NULL)
            return -1;
        d = siphash13(self->k0, self->k1, (const uint8_t *)PyBytes_AS_STRING(bytes),
                      PyBytes_GET_SIZE(bytes));
        Py_DECREF(bytes);
    }
    *out = d ? d : 1;
    Py_XSETREF(self->last, Py_NewRef(id));
    self->last_digest = *out;
    return 0;
}

static inline size_t
slot_of(IdWindow *self, uint64_t d)
{
    size_t i = (size_t)d & self->mask;
    while (self->table[i] && self->table[i] != d)
        i = (i + 1) & self->mask;
    return i;
}

static void
forget(IdWindow *self, uint64_t d)
{
    size_t mask = self->mask, i = slot_of(self, d);
    if (!self->table[i])
        return;
    /* backward shift: move up each later entry of the cluster whose home is not between */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        uint64_t e = self->table[j];
        if (!e)
            break;
        size_t home = (size_t)e & mask;
        if ((j > i) ? (home <= i || home > j) : (home <= i && home > j)) {
            self->table[i] = e;
            i = j;
        }
    }
    self->table[i] = 0;
}

/* remember a digest not held (the caller looked) */
static void
remember(IdWindow *self, uint64_t d, size_t slot)
{
    if (self->count == self->capacity) {
        uint64_t old = self->ring[self->head];
        self->ring[self->head] = d;
        if (++self->head == self->capacity)
            self->head = 0;
        forget(self, old);
        slot = slot_of(self, d); /* (the shift may have moved the empty slot it found) */
    } else {
        Py_ssize_t at = self->head + self->count;
        self->ring[at < self->capacity ? at : at - self->capacity] = d;
        self->count++;
    }
    self->table[slot] = d;
}

static int
IdWindow_contains(PyObject *op, PyObject *id)
{
    IdWindow *self = (IdWindow *)op;
    uint64_t d;
    if (digest_of(self, id, &d) < 0)
        return -1;
    if (self->capacity == 0)
        return 0;
    return self->table[slot_of(self, d)] != 0;
}

static PyObject *
IdWindow_add(PyObject *op, PyObject *id)
{
    IdWindow *self = (IdWindow *)op;
    uint64_t d;
    if (digest_of(self, id, &d) < 0)
        return NULL;
    if (self->capacity > 0) {
        size_t slot = slot_of(self, d);
        if (!self->table[slot])
            remember(self, d, slot);
    }
    Py_RETURN_NONE;
}

static PyObject *
IdWindow_state(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    IdWindow *self = (IdWindow *)op;
    PyObject *out = PyBytes_FromStringAndSize(NULL, KEY_BYTES + 8 * self->count);
    if (out == NULL)
        return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    store64(p, self->k0);
    store64(p + 8, self->k1);
    for (Py_ssize_t i = 0; i < self->count; i++)
        store64(p + KEY_BYTES + 8 * i, self->ring[(self->head + i) % self->capacity]);
    return out;
}

static PyObject *
IdWindow_reduce(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    IdWindow *self = (IdWindow *)op;
    PyObject *state = IdWindow_state(op, NULL);
    if (state == NULL)
        return NULL;
    return Py_BuildValue("O(nN)", (PyObject *)Py_TYPE(op), self->capacity, state);
}

static PyObject *
IdWindow_sizeof(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    IdWindow *self = (IdWindow *)op;
    size_t ring = self->capacity ? (size_t)self->capacity : 1;
    return PyLong_FromSize_t(Py_TYPE(op)->tp_basicsize + (self->mask + 1 + ring) * sizeof(uint64_t));
}

static Py_ssize_t
IdWindow_len(PyObject *op)
{
    return ((IdWindow *)op)->count;
}

static void
IdWindow_dealloc(PyObject *op)
{
    IdWindow *self = (IdWindow *)op;
    release(self->table, self->mask + 1);
    release(self->ring, self->capacity ? (size_t)self->capacity : 1);
    Py_XDECREF(self->last);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *
IdWindow_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"capacity", "state", NULL};
    Py_ssize_t capacity;
    Py_buffer state;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "ny*", kwlist, &capacity, &state))
        return NULL;
    const uint8_t *p = state.buf;
    Py_ssize_t n = (state.len - KEY_BYTES) / 8;
    if (capacity < 0 || capacity > PY_SSIZE_T_MAX / 16 || state.len < KEY_BYTES ||
        (state.len - KEY_BYTES) % 8) {
        PyBuffer_Release(&state);
        PyErr_SetString(PyExc_ValueError,
                        "IdWindow(0 <= capacity < 2**59, state: a 16-byte key, then 8 bytes a digest)");
        return NULL;
    }
    IdWindow *self = (IdWindow *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyBuffer_Release(&state);
        return NULL;
    }
    self->capacity = capacity;
    self->k0 = load64(p);
    self->k1 = load64(p + 8);
    size_t size = 2;
    while (size < 2 * (size_t)capacity)
        size <<= 1;
    self->mask = size - 1;
    self->table = zeroed(size);
    self->ring = zeroed(capacity ? (size_t)capacity : 1);
    if (self->table == NULL || self->ring == NULL) {
        PyBuffer_Release(&state);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    /* the digests held, oldest first: the newest `capacity` of them (`state()` writes each
       once; a state that holds one twice was not written by it) */
    for (Py_ssize_t i = n > capacity ? n - capacity : 0; i < n; i++) {
        uint64_t d = load64(p + KEY_BYTES + 8 * i);
        d = d ? d : 1;
        size_t slot = slot_of(self, d);
        if (self->table[slot]) {
            PyBuffer_Release(&state);
            Py_DECREF(self);
            PyErr_SetString(PyExc_ValueError, "an IdWindow state holds a digest twice");
            return NULL;
        }
        remember(self, d, slot);
    }
    PyBuffer_Release(&state);
    return (PyObject *)self;
}

static PyMethodDef IdWindow_methods[] = {
    {"add", IdWindow_add, METH_O, PyDoc_STR("add(id): remember it; the oldest goes when full")},
    {"state", IdWindow_state, METH_NOARGS,
     PyDoc_STR("state() -> bytes: the key, then the digests held, oldest first")},
    {"__reduce__", IdWindow_reduce, METH_NOARGS, NULL},
    {"__sizeof__", IdWindow_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef IdWindow_members[] = {
    {"capacity", T_PYSSIZET, offsetof(IdWindow, capacity), READONLY,
     PyDoc_STR("how many ids it holds at most")},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods IdWindow_sequence = {
    .sq_length = IdWindow_len,
    .sq_contains = IdWindow_contains,
};

static PyTypeObject IdWindowType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runwatch.stream._ids.IdWindow",
    .tp_doc = PyDoc_STR("IdWindow(capacity, state): the last `capacity` event ids added, as "
                        "keyed digests (`RecentIds`, native); `state`: a 16-byte key, then "
                        "digests oldest first, as `state()` gives them"),
    .tp_basicsize = sizeof(IdWindow),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = IdWindow_new,
    .tp_dealloc = IdWindow_dealloc,
    .tp_methods = IdWindow_methods,
    .tp_members = IdWindow_members,
    .tp_as_sequence = &IdWindow_sequence,
};

static PyObject *
digest(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer key, data;
    if (!PyArg_ParseTuple(args, "y*y*", &key, &data))
        return NULL;
    PyObject *out = NULL;
    if (key.len != KEY_BYTES)
        PyErr_SetString(PyExc_ValueError, "a key is 16 bytes");
    else
        out = PyLong_FromUnsignedLongLong(
            siphash13(load64(key.buf), load64((const uint8_t *)key.buf + 8), data.buf, data.len));
    PyBuffer_Release(&key);
    PyBuffer_Release(&data);
    return out;
}

static PyMethodDef module_methods[] = {
    {"siphash13", digest, METH_VARARGS,
     PyDoc_STR("siphash13(key, data) -> int: the digest IdWindow takes of an id's UTF-8 bytes")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "runwatch.stream._ids",
    .m_doc = PyDoc_STR("The duplicate-id window as keyed digests (tracked.py `RecentIds`)."),
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__ids(void)
{
    if (PyType_Ready(&IdWindowType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&IdWindowType);
    if (PyModule_AddObject(m, "IdWindow", (PyObject *)&IdWindowType) < 0) {
        Py_DECREF(&IdWindowType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

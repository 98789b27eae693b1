/* smelt._smelt_accel: the cached call of a smelt.jit function in C (optional).
 *
 * Built by meson when Python's headers are there; without it the package
 * does the same in Python over cffi (python/smelt/_jit.py), so nothing is
 * compiled at install time.  It uses neither NumPy's headers (arrays are
 * read through the buffer protocol, so one build serves NumPy 1.x and 2.x)
 * nor smelt's: the package hands it the address of smelt_plan_run_rebind
 * from the library cffi loaded, so both use one libsmelt.
 *
 *   call(table, args, function[, out]) -> the result, or None where the Python
 *   path must take the call (an argument that is not an ndarray, a signature
 *   not in the table, an out= that is not a C-contiguous, aligned, writeable
 *   ndarray of the output's shape and dtype, the context's lock held by
 *   another thread, a run error: the Python path runs it again and raises).
 *
 * table: {key bytes: entry list} where the key is each argument's buffer
 * format, item size, shape and strides, and an entry is
 *   [plan address, n_in, inputs array address, n_out, outputs array
 *    address, (extra input addresses...), ((shape, dtype) of each output),
 *    lock, calls, the _Entry, (the output's buffer format, item size)]; a
 *    call sets function._last to the _Entry.
 * Only entries of one output, no callbacks, no donation are in the table. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef int (*run_rebind_fn)(void *p, int n_in, void *const *inputs, int n_out, void *const *outputs,
                             void *const *data);

static run_rebind_fn run_rebind;
static PyObject *ndarray_type, *np_empty;

enum { MAX_ARGS = 16, MAX_PTRS = 64, KEY_BYTES = 2048, GIL_FREE_ELEMS = 1 << 15 };

static PyObject *setup(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long fn;
    PyObject *nd, *empty;
    if (!PyArg_ParseTuple(args, "KOO", &fn, &nd, &empty))
        return NULL;
    run_rebind = (run_rebind_fn)(uintptr_t)fn;
    Py_XDECREF(ndarray_type);
    Py_XDECREF(np_empty);
    Py_INCREF(nd);
    Py_INCREF(empty);
    ndarray_type = nd;
    np_empty = empty;
    Py_RETURN_NONE;
}

static void *addr(PyObject *o)
{
    return (void *)(uintptr_t)PyLong_AsUnsignedLongLongMask(o);
}

/* The arguments' buffers and the key of their signature: 1, 0 when the
 * Python path must take them (views[0..*got) are held either way), -1 on a
 * Python error. */
static int build_key(PyObject *args, Py_buffer *views, Py_ssize_t *got, char *key, size_t *klen, Py_ssize_t *elems)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    *got = 0;
    *klen = 0;
    *elems = 0;
    if (n > MAX_ARGS || !ndarray_type)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if ((PyObject *)Py_TYPE(a) != ndarray_type)
            return 0;
        Py_buffer *v = &views[i];
        if (PyObject_GetBuffer(a, v, PyBUF_RECORDS_RO) < 0) {
            PyErr_Clear();
            return 0;
        }
        (*got)++;
        size_t flen = strlen(v->format);
        size_t need = flen + 1 + sizeof(Py_ssize_t) * (size_t)(2 + 2 * v->ndim);
        if (*klen + need > KEY_BYTES)
            return 0;
        memcpy(key + *klen, v->format, flen + 1);
        *klen += flen + 1;
        Py_ssize_t hdr[2] = {v->itemsize, v->ndim};
        memcpy(key + *klen, hdr, sizeof hdr);
        *klen += sizeof hdr;
        memcpy(key + *klen, v->shape, sizeof(Py_ssize_t) * (size_t)v->ndim);
        *klen += sizeof(Py_ssize_t) * (size_t)v->ndim;
        memcpy(key + *klen, v->strides, sizeof(Py_ssize_t) * (size_t)v->ndim);
        *klen += sizeof(Py_ssize_t) * (size_t)v->ndim;
        *elems += v->len / (v->itemsize ? v->itemsize : 1);
    }
    return 1;
}

static void release(Py_buffer *views, Py_ssize_t got)
{
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
}

/* key(args) -> the bytes call() looks up for these arguments, or None */
static PyObject *key_of(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *t;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &t))
        return NULL;
    Py_buffer views[MAX_ARGS];
    char key[KEY_BYTES];
    size_t klen;
    Py_ssize_t got, elems;
    int r = build_key(t, views, &got, key, &klen, &elems);
    release(views, got);
    if (r < 0)
        return NULL;
    if (r == 0)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(key, (Py_ssize_t)klen);
}

/* Whether the buffer v (C-contiguous) has the output's shape (a tuple), its
 * format and item size (fmt: (str, int)) and is aligned: 1, 0, or -1 with
 * a Python error set */
static int out_fits(const Py_buffer *v, PyObject *shape, PyObject *fmt)
{
    if (!PyTuple_Check(shape) || !PyTuple_Check(fmt) || PyTuple_GET_SIZE(fmt) != 2 ||
        PyTuple_GET_SIZE(shape) != v->ndim)
        return 0;
    for (int d = 0; d < v->ndim; d++) {
        long long e = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        if (e == -1 && PyErr_Occurred())
            return -1;
        if (e != (long long)v->shape[d])
            return 0;
    }
    const char *f = PyUnicode_AsUTF8(PyTuple_GET_ITEM(fmt, 0));
    long long z = PyLong_AsLongLong(PyTuple_GET_ITEM(fmt, 1));
    if (!f || (z == -1 && PyErr_Occurred()))
        return -1;
    return v->format && !strcmp(v->format, f) && v->itemsize == z && z > 0 && (uintptr_t)v->buf % (uintptr_t)z == 0;
}

static PyObject *call(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if ((argc != 3 && argc != 4) || !PyDict_Check(argv[0]) || !PyTuple_Check(argv[1]) || !run_rebind)
        Py_RETURN_NONE;
    PyObject *table = argv[0], *args = argv[1], *given = argc == 4 && argv[3] != Py_None ? argv[3] : NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    Py_buffer views[MAX_ARGS];
    char key[KEY_BYTES];
    size_t klen = 0;
    Py_ssize_t got = 0, elems = 0;
    PyObject *result = Py_None, *entry;
    int r = build_key(args, views, &got, key, &klen, &elems);
    if (r < 0)
        goto error;
    if (r == 0)
        goto fallback_release;
    {
        PyObject *k = PyBytes_FromStringAndSize(key, (Py_ssize_t)klen);
        if (!k)
            goto error;
        entry = PyDict_GetItemWithError(table, k);
        Py_DECREF(k);
        if (!entry) {
            if (PyErr_Occurred())
                goto error;
            goto fallback_release;
        }
    }
    /* [plan, n_in, in_arr, n_out, out_arr, extra, specs, lock, calls, entry, format] */
    if (!PyList_Check(entry) || PyList_GET_SIZE(entry) != 11)
        goto fallback_release;
    PyObject *extra = PyList_GET_ITEM(entry, 5), *specs = PyList_GET_ITEM(entry, 6);
    PyObject *lock = PyList_GET_ITEM(entry, 7);
    Py_ssize_t n_extra = PyTuple_GET_SIZE(extra);
    if (n + n_extra + 1 > MAX_PTRS || PyTuple_GET_SIZE(specs) != 1)
        goto fallback_release;
    void *ptrs[MAX_PTRS];
    for (Py_ssize_t i = 0; i < n; i++)
        ptrs[i] = views[i].buf;
    for (Py_ssize_t i = 0; i < n_extra; i++)
        ptrs[n + i] = addr(PyTuple_GET_ITEM(extra, i));
    PyObject *out;
    Py_buffer ov;
    if (given) { /* out=: written in place when it is what the plan's output tensor describes */
        if (Py_TYPE(given) != (PyTypeObject *)ndarray_type)
            goto fallback_release;
        if (PyObject_GetBuffer(given, &ov, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
            PyErr_Clear();
            goto fallback_release;
        }
        int fits = out_fits(&ov, PyTuple_GET_ITEM(PyTuple_GET_ITEM(specs, 0), 0), PyList_GET_ITEM(entry, 10));
        ptrs[n + n_extra] = ov.buf;
        PyBuffer_Release(&ov);
        if (fits < 0)
            goto error;
        if (!fits)
            goto fallback_release;
        out = given;
        Py_INCREF(out);
    } else {
        out = PyObject_Call(np_empty, PyTuple_GET_ITEM(specs, 0), NULL);
        if (!out)
            goto error;
        if (PyObject_GetBuffer(out, &ov, PyBUF_WRITABLE | PyBUF_STRIDES) < 0) {
            PyErr_Clear();
            Py_DECREF(out);
            goto fallback_release;
        }
        ptrs[n + n_extra] = ov.buf;
        PyBuffer_Release(&ov);
    }
    /* the context's lock (threading.Lock), without blocking: held elsewhere,
     * the Python path waits for it */
    PyObject *ok = PyObject_CallMethod(lock, "acquire", "O", Py_False);
    if (!ok) {
        Py_DECREF(out);
        goto error;
    }
    int mine = ok == Py_True;
    Py_DECREF(ok);
    if (!mine) {
        Py_DECREF(out);
        goto fallback_release;
    }
    void *plan = addr(PyList_GET_ITEM(entry, 0));
    int n_in = (int)PyLong_AsLong(PyList_GET_ITEM(entry, 1));
    void *in_arr = addr(PyList_GET_ITEM(entry, 2));
    int n_out = (int)PyLong_AsLong(PyList_GET_ITEM(entry, 3));
    void *out_arr = addr(PyList_GET_ITEM(entry, 4));
    int st;
    if (elems >= GIL_FREE_ELEMS) {
        Py_BEGIN_ALLOW_THREADS
        st = run_rebind(plan, n_in, in_arr, n_out, out_arr, ptrs);
        Py_END_ALLOW_THREADS
    } else {
        st = run_rebind(plan, n_in, in_arr, n_out, out_arr, ptrs);
    }
    PyObject *rel = PyObject_CallMethod(lock, "release", NULL);
    Py_XDECREF(rel);
    if (!rel) {
        Py_DECREF(out);
        goto error;
    }
    if (st) { /* the Python path runs it again and raises smelt's error */
        Py_DECREF(out);
        goto fallback_release;
    }
    PyObject *calls = PyLong_FromLongLong(PyLong_AsLongLong(PyList_GET_ITEM(entry, 8)) + 1);
    if (calls)
        PyList_SetItem(entry, 8, calls);
    if (PyObject_SetAttrString(argv[2], "_last", PyList_GET_ITEM(entry, 9)) < 0) {
        Py_DECREF(out);
        goto error;
    }
    result = out;
    release(views, got);
    return result;
fallback_release:
    release(views, got);
    Py_RETURN_NONE;
error:
    release(views, got);
    return NULL;
}

/* ---- DLPack: the destructor of the capsules smelt.DeviceArray.__dlpack__
 * hands out (python/smelt/_dlpack.py).  In C because a consumer may drop a
 * capsule while an exception is pending (NumPy refusing a CUDA array does),
 * which no destructor written in Python survives: the exception is kept
 * aside while the managed tensor's deleter runs.  The layout is dlpack.h's
 * DLManagedTensor. */
typedef struct {
    void *data;
    int32_t device_type, device_id, ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
    void *manager_ctx;
    void (*deleter)(void *self);
} dl_managed;

static void dlpack_capsule_destructor(PyObject *cap)
{
    if (!PyCapsule_IsValid(cap, "dltensor")) /* consumed: the consumer calls the deleter */
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
    PyErr_Restore(t, v, tb);
}

static PyObject *dlpack_destructor(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)dlpack_capsule_destructor);
}

static PyMethodDef methods[] = {
    {"dlpack_destructor", dlpack_destructor, METH_NOARGS, "the address of the DLPack capsule destructor"},
    {"setup", setup, METH_VARARGS, "setup(address of smelt_plan_run_rebind, numpy.ndarray, numpy.empty)"},
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(table, args, function[, out]) -> result or None"},
    {"key", key_of, METH_VARARGS, "key(args) -> the table key of these arguments, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_smelt_accel",
                                    "the cached call of a smelt.jit function in C", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__smelt_accel(void)
{
    return PyModule_Create(&module);
}

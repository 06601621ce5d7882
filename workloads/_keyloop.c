/* The point-lookup query loop in C: one prepared statement, one uniform integer key per
 * transaction, as pgbench -S and sysbench oltp_point_select run it.
 *
 * Why: on a 2-vCPU machine every client microsecond is taken from the server, and the
 * Python loop around a libpq or libmariadb call costs a few µs per transaction (see
 * BENCHMARKS.md). This module runs the same calls from C between two Python ticks.
 *
 * It links no database library. The caller passes the addresses of the functions of the
 * library that owns the connection (psycopg's own libpq, or the libmariadb that ctypes
 * loaded), so the handle and the functions always come from the same build.
 *
 * Each call runs transactions until the monotonic clock (the clock of Python's
 * time.perf_counter_ns) reaches `until_ns` or the latency buffer is full, and writes one
 * latency (ns, from the previous transaction's end) per transaction, and returns when the last
 * one ended. On the first failed statement it stops and returns what the library said and when
 * that failed transaction started, for the caller's usual error path (which times its retry).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* libpq (stable ABI since PostgreSQL 7.4) */
typedef void *(*pq_exec_prepared_t)(void *conn, const char *name, int n, const char *const *values,
                                    const int *lengths, const int *formats, int result_format);
typedef int (*pq_result_status_t)(const void *res);
typedef void (*pq_clear_t)(void *res);
typedef char *(*pq_result_error_field_t)(const void *res, int field);
typedef char *(*pq_result_error_message_t)(const void *res);
typedef char *(*pq_error_message_t)(const void *conn);
#define PGRES_COMMAND_OK 1
#define PGRES_TUPLES_OK 2
#define PG_DIAG_SQLSTATE 'C'

/* libmariadb / libmysqlclient statement API */
typedef int (*my_stmt_int_t)(void *stmt);
typedef const char *(*my_stmt_str_t)(void *stmt);
#define MYSQL_NO_DATA 100
#define MYSQL_DATA_TRUNCATED 101

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* splitmix64: a fast, well-mixed generator; the state lives in the caller's buffer */
static inline uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* lo + a uniform draw in [0, span): the multiply-shift reduction (bias below 2^-32 for spans < 2^32) */
static inline int64_t draw(uint64_t *s, int64_t lo, uint64_t span) {
    return lo + (int64_t)(((unsigned __int128)next_rand(s) * span) >> 64);
}

static void *as_ptr(PyObject *o) { return PyLong_AsVoidPtr(o); }

/* pq_loop(conn, fns, name, lo, span, state, t0, until_ns, lat) -> (n, t_last, error)
 * fns: (PQexecPrepared, PQresultStatus, PQclear, PQresultErrorField, PQresultErrorMessage,
 *       PQerrorMessage) addresses; state: writable 8-byte buffer; lat: writable int64 buffer.
 * error: None, or (sqlstate bytes, message bytes). */
static PyObject *pq_loop(PyObject *self, PyObject *args) {
    PyObject *conn_o, *fns;
    const char *name;
    long long lo, span, t0, until;
    Py_buffer st, lat;
    if (!PyArg_ParseTuple(args, "OO!yLLw*LLw*", &conn_o, &PyTuple_Type, &fns, &name, &lo, &span, &st, &t0,
                          &until, &lat))
        return NULL;
    PyObject *ret = NULL;
    if (PyTuple_GET_SIZE(fns) != 6 || st.len < 8 || span <= 0) {
        PyErr_SetString(PyExc_ValueError, "pq_loop: bad arguments");
        goto done;
    }
    void *conn = as_ptr(conn_o);
    pq_exec_prepared_t exec = (pq_exec_prepared_t)as_ptr(PyTuple_GET_ITEM(fns, 0));
    pq_result_status_t status = (pq_result_status_t)as_ptr(PyTuple_GET_ITEM(fns, 1));
    pq_clear_t clear = (pq_clear_t)as_ptr(PyTuple_GET_ITEM(fns, 2));
    pq_result_error_field_t field = (pq_result_error_field_t)as_ptr(PyTuple_GET_ITEM(fns, 3));
    pq_result_error_message_t rmsg = (pq_result_error_message_t)as_ptr(PyTuple_GET_ITEM(fns, 4));
    pq_error_message_t cmsg = (pq_error_message_t)as_ptr(PyTuple_GET_ITEM(fns, 5));
    if (PyErr_Occurred())
        goto done;
    uint64_t *state = (uint64_t *)st.buf;
    int64_t *out = (int64_t *)lat.buf;
    Py_ssize_t cap = lat.len / (Py_ssize_t)sizeof(int64_t), n = 0;
    char key[24];
    const char *values[1] = {key};
    PyObject *err = Py_None;
    Py_INCREF(err);
    int64_t t1 = t0;
    while (n < cap) {
        snprintf(key, sizeof key, "%lld", (long long)draw(state, lo, (uint64_t)span));
        void *res = exec(conn, name, 1, values, NULL, NULL, 0);
        int s = res ? status(res) : -1;
        if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
            const char *code = res ? field(res, PG_DIAG_SQLSTATE) : NULL;
            const char *msg = res ? rmsg(res) : cmsg(conn);
            Py_DECREF(err);
            err = Py_BuildValue("(yy)", code ? code : "", msg ? msg : "");
            if (res)
                clear(res);
            break;
        }
        clear(res);
        t1 = now_ns();
        out[n++] = t1 - t0;
        t0 = t1;
        if (t1 >= until)
            break;
    }
    if (err)
        ret = Py_BuildValue("(nLN)", n, (long long)t1, err);
done:
    PyBuffer_Release(&st);
    PyBuffer_Release(&lat);
    return ret;
}

/* my_loop(stmt, key_addr, fns, has_rows, lo, span, state, t0, until_ns, lat) -> (n, t_last, failed)
 * fns: (mysql_stmt_execute, mysql_stmt_fetch, mysql_stmt_free_result) addresses; key_addr: the
 * bound MYSQL_TYPE_LONGLONG parameter buffer; has_rows: the statement returns a result set (read
 * to its end, as the Python path does). failed: True when a call failed (the caller reads the
 * statement's error itself). */
static PyObject *my_loop(PyObject *self, PyObject *args) {
    PyObject *stmt_o, *key_o, *fns;
    int has_rows;
    long long lo, span, t0, until;
    Py_buffer st, lat;
    if (!PyArg_ParseTuple(args, "OOO!pLLw*LLw*", &stmt_o, &key_o, &PyTuple_Type, &fns, &has_rows, &lo, &span, &st,
                          &t0, &until, &lat))
        return NULL;
    PyObject *ret = NULL;
    if (PyTuple_GET_SIZE(fns) != 3 || st.len < 8 || span <= 0) {
        PyErr_SetString(PyExc_ValueError, "my_loop: bad arguments");
        goto done;
    }
    void *stmt = as_ptr(stmt_o);
    long long *keyp = (long long *)as_ptr(key_o);
    my_stmt_int_t exec = (my_stmt_int_t)as_ptr(PyTuple_GET_ITEM(fns, 0));
    my_stmt_int_t fetch = (my_stmt_int_t)as_ptr(PyTuple_GET_ITEM(fns, 1));
    my_stmt_int_t free_result = (my_stmt_int_t)as_ptr(PyTuple_GET_ITEM(fns, 2));
    if (PyErr_Occurred())
        goto done;
    uint64_t *state = (uint64_t *)st.buf;
    int64_t *out = (int64_t *)lat.buf;
    Py_ssize_t cap = lat.len / (Py_ssize_t)sizeof(int64_t), n = 0;
    int failed = 0;
    int64_t t1 = t0;
    while (n < cap) {
        *keyp = draw(state, lo, (uint64_t)span);
        if (exec(stmt)) {
            failed = 1;
            break;
        }
        if (has_rows) {
            int rc;
            while ((rc = fetch(stmt)) == 0 || rc == MYSQL_DATA_TRUNCATED)
                ;
            if (rc != MYSQL_NO_DATA) {
                failed = 1;
                free_result(stmt);
                break;
            }
            free_result(stmt);
        }
        t1 = now_ns();
        out[n++] = t1 - t0;
        t0 = t1;
        if (t1 >= until)
            break;
    }
    ret = Py_BuildValue("(nLO)", n, (long long)t1, failed ? Py_True : Py_False);
done:
    PyBuffer_Release(&st);
    PyBuffer_Release(&lat);
    return ret;
}

static PyObject *now(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(now_ns()); }

static PyMethodDef methods[] = {
    {"pq_loop", pq_loop, METH_VARARGS, "Point lookups through libpq until a deadline (see the module source)."},
    {"my_loop", my_loop, METH_VARARGS, "Point lookups through libmariadb until a deadline (see the module source)."},
    {"now_ns", now, METH_NOARGS, "The loop's clock (CLOCK_MONOTONIC, as time.perf_counter_ns on Linux), ns."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "workloads._keyloop",
                                    "Point-lookup query loops in C.", -1, methods};

PyMODINIT_FUNC PyInit__keyloop(void) { return PyModule_Create(&module); }

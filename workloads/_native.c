/* The native executor: a workload's transaction as a small program, run in C on a connection this
 * module opens itself (issue 15).
 *
 * Why: on a 2-vCPU machine every client microsecond is taken from the server; the Python loop around
 * libpq/libmariadb costs several µs per statement (BENCHMARKS.md). Here the whole transaction
 * (parameter draws, \set arithmetic, statements, BEGIN/COMMIT) runs in C between two Python ticks.
 *
 * It links no database library and needs no database headers: it dlopen()s the libpq that psycopg's
 * binary wheel bundles, or libmariadb, resolves the few functions it calls with dlsym() against its
 * own minimal prototypes (libpq's ABI is stable since 7.4; MYSQL_BIND as MariaDB Connector/C 3.x lays
 * it out), and owns the connection it opens: no handle or address is borrowed from Python drivers.
 *
 * The Python side (workloads/native.py) validates the program before load(); load() checks it again
 * (every index in range, the stack never under- or overflows), so a bad program is a ValueError,
 * never a wild read. Every library call's return is checked.
 *
 * Program: int64 words. Expression ops push/pop an int64 stack (as pgbench's \set: + - * / % with
 * pgbench's truncating division, unary minus, abs, least/greatest, random(lo, hi) uniform inclusive);
 * OP_STORE pops into a variable; OP_EXEC runs a prepared statement with parameters taken from
 * variables (an integer, or a string of a pool picked by the variable's value); OP_SIMPLE sends one
 * text statement (BEGIN, COMMIT, ...). One run of the program is one transaction.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_CONST = 1, OP_VAR, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_NEG, OP_ABS, OP_LEAST,
       OP_GREATEST, OP_RANDOM, OP_STORE, OP_EXEC, OP_SIMPLE };
#define MAX_STACK 64
#define MAX_VARS 256
#define MAX_STMTS 64
#define MAX_PARAMS 32
#define MAX_PROG 8192
#define MAX_STR 1024
#define SH_BINS 1024
#define SH_OVER 4096
#define ENGINE_PG 1
#define ENGINE_MY 2

/* ---- libpq: the few calls used, with their documented prototypes ---- */
typedef void *(*pq_connectdb_t)(const char *);
typedef int (*pq_status_t)(const void *);
typedef char *(*pq_error_message_t)(const void *);
typedef void (*pq_finish_t)(void *);
typedef void *(*pq_exec_t)(void *, const char *);
typedef void *(*pq_prepare_t)(void *, const char *, const char *, int, const void *);
typedef void *(*pq_exec_prepared_t)(void *, const char *, int, const char *const *, const int *, const int *, int);
typedef int (*pq_result_status_t)(const void *);
typedef char *(*pq_result_error_field_t)(const void *, int);
typedef char *(*pq_result_error_message_t)(const void *);
typedef int (*pq_ntuples_t)(const void *);
typedef void (*pq_clear_t)(void *);
typedef int (*pq_transaction_status_t)(const void *);
#define CONNECTION_OK 0
#define PGRES_EMPTY_QUERY 0
#define PGRES_COMMAND_OK 1
#define PGRES_TUPLES_OK 2
#define PG_DIAG_SQLSTATE 'C'
#define PQTRANS_IDLE 0

/* ---- libmariadb ---- */
typedef struct {
    unsigned long *length;
    char *is_null;
    void *buffer;
    char *error;
    void *u;
    void *store_param_func, *fetch_result, *skip_result;
    unsigned long buffer_length, offset, length_value;
    unsigned int flags, pack_length;
    int buffer_type;
    char error_value, is_unsigned, long_data_used, is_null_value;
    void *extension;
} my_bind_t; /* MYSQL_BIND of MariaDB Connector/C 3.x (mariadb_stmt.h) */
typedef void *(*my_init_t)(void *);
typedef int (*my_options_t)(void *, int, const void *);
typedef void *(*my_real_connect_t)(void *, const char *, const char *, const char *, const char *, unsigned int,
                                   const char *, unsigned long);
typedef int (*my_set_charset_t)(void *, const char *);
typedef void (*my_close_t)(void *);
typedef unsigned int (*my_errno_t)(void *);
typedef const char *(*my_error_t)(void *);
typedef int (*my_real_query_t)(void *, const char *, unsigned long);
typedef void *(*my_store_result_t)(void *);
typedef void (*my_free_result_t)(void *);
typedef unsigned int (*my_field_count_t)(void *);
typedef void *(*my_stmt_init_t)(void *);
typedef int (*my_stmt_prepare_t)(void *, const char *, unsigned long);
typedef unsigned long (*my_stmt_param_count_t)(void *);
typedef char (*my_stmt_bind_param_t)(void *, my_bind_t *);
typedef int (*my_stmt_int_t)(void *);
typedef char (*my_stmt_char_t)(void *);
typedef unsigned long long (*my_stmt_num_rows_t)(void *);
typedef unsigned int (*my_stmt_errno_t)(void *);
typedef const char *(*my_stmt_error_t)(void *);
typedef unsigned int (*my_stmt_field_count_t)(void *);
#define MYSQL_OPT_CONNECT_TIMEOUT 0
#define MYSQL_TYPE_LONGLONG 8
#define MYSQL_TYPE_STRING 254

typedef struct {
    int nparams, has_rows;
    char name[24];    /* PostgreSQL: the prepared statement's name */
    void *mst;        /* MySQL: MYSQL_STMT* */
    my_bind_t *bind;  /* MySQL: parameter binds */
    long long *ints;  /* MySQL: integer parameter buffers */
    char **sbuf;      /* MySQL: string parameter buffers (MAX_STR each) */
    unsigned long *lens;
    long long execs, rows, ns; /* per statement: executions, result rows, ns (from the previous statement's end) */
} stmt_t;

typedef struct {
    int engine;
    void *dl;
    void *conn;
    /* libpq */
    pq_connectdb_t connectdb; pq_status_t status; pq_error_message_t errmsg; pq_finish_t finish; pq_exec_t exec;
    pq_prepare_t prepare; pq_exec_prepared_t exec_prepared; pq_result_status_t rstatus;
    pq_result_error_field_t rfield; pq_result_error_message_t rmsg; pq_ntuples_t ntuples; pq_clear_t clear;
    pq_transaction_status_t txstatus;
    /* libmariadb */
    my_init_t m_init; my_options_t m_options; my_real_connect_t m_connect; my_set_charset_t m_charset;
    my_close_t m_close; my_errno_t m_errno; my_error_t m_error; my_real_query_t m_query;
    my_store_result_t m_store; my_free_result_t m_free; my_field_count_t m_field_count;
    my_stmt_init_t s_init; my_stmt_prepare_t s_prepare; my_stmt_param_count_t s_param_count;
    my_stmt_bind_param_t s_bind; my_stmt_int_t s_execute, s_store; my_stmt_char_t s_free_result, s_close;
    my_stmt_num_rows_t s_num_rows; my_stmt_errno_t s_errno; my_stmt_error_t s_error;
    my_stmt_field_count_t s_field_count;
    /* statements and the loaded program */
    int nstmts;
    stmt_t st[MAX_STMTS];
    int64_t *prog;
    Py_ssize_t nprog;
    char **texts; /* OP_SIMPLE texts */
    int ntexts;
    /* MySQL: the OP_SIMPLE texts prepared (NULL: the server cannot prepare it, sent as text). BEGIN and
     * COMMIT as COM_STMT_EXECUTE, as sysbench sends them: the server skips parsing them each time. */
    void *tst[MAX_STMTS];
    char ***pools; int *pool_n; unsigned long **pool_len; int npools;
    int nvars;
    int nexec; /* statements per transaction (OP_EXEC and OP_SIMPLE): the per-statement latency slots */
    /* Per-statement latencies, counted here rather than handed to Python one by one (that cost the
     * point-select loop about 0.2 µs per transaction): per slot, counts of 0..SH_BINS-1 µs, and the
     * longer ones as (slot, µs) pairs. drain() hands them out and empties them. */
    uint32_t *shist; /* nexec * SH_BINS */
    int64_t *sover;  /* SH_OVER pairs */
    int nover;
} native_t;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* splitmix64, as workloads/program.py's Draw (the Python reference interpreter) and tpcc_sp's replayed draws */
static inline uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline int64_t draw(uint64_t *s, int64_t lo, uint64_t span) {
    return lo + (int64_t)(((unsigned __int128)next_rand(s) * span) >> 64);
}

#define CAPSULE "dbdiag.native"

static void free_program(native_t *n) {
    for (int i = 0; i < MAX_STMTS; i++) {
        if (n->tst[i] && n->s_close)
            n->s_close(n->tst[i]);
        n->tst[i] = NULL;
    }
    free(n->shist);
    free(n->sover);
    n->shist = NULL;
    n->sover = NULL;
    n->nover = 0;
    free(n->prog);
    n->prog = NULL;
    n->nprog = 0;
    for (int i = 0; i < n->ntexts; i++)
        free(n->texts[i]);
    free(n->texts);
    n->texts = NULL;
    n->ntexts = 0;
    for (int p = 0; p < n->npools; p++) {
        for (int i = 0; i < n->pool_n[p]; i++)
            free(n->pools[p][i]);
        free(n->pools[p]);
        free(n->pool_len[p]);
    }
    free(n->pools);
    free(n->pool_n);
    free(n->pool_len);
    n->pools = NULL;
    n->pool_n = NULL;
    n->pool_len = NULL;
    n->npools = 0;
}

static void close_native(native_t *n) {
    free_program(n); /* first: it closes the program's prepared texts while the connection is open */
    for (int i = 0; i < n->nstmts; i++) {
        stmt_t *s = &n->st[i];
        if (s->mst && n->s_close)
            n->s_close(s->mst);
        s->mst = NULL;
        if (s->sbuf) {
            for (int j = 0; j < s->nparams; j++)
                free(s->sbuf[j]);
        }
        free(s->sbuf);
        free(s->bind);
        free(s->ints);
        free(s->lens);
        s->sbuf = NULL;
        s->bind = NULL;
        s->ints = NULL;
        s->lens = NULL;
    }
    n->nstmts = 0;
    if (n->conn) {
        if (n->engine == ENGINE_PG)
            n->finish(n->conn);
        else
            n->m_close(n->conn);
        n->conn = NULL;
    }
    /* The library stays loaded: other connections of this process may use it, and unloading libpq
     * with its OpenSSL state is not safe. */
}

static void destroy(PyObject *cap) {
    native_t *n = PyCapsule_GetPointer(cap, CAPSULE);
    if (n) {
        close_native(n);
        free(n);
    }
}

static native_t *get(PyObject *cap) {
    native_t *n = PyCapsule_GetPointer(cap, CAPSULE);
    if (n && !n->conn) {
        PyErr_SetString(PyExc_ValueError, "native connection is closed");
        return NULL;
    }
    return n;
}

/* The open connection of a call whose one argument is the capsule (NULL with an exception set). */
static native_t *get_arg(PyObject *args) {
    PyObject *cap;
    return PyArg_ParseTuple(args, "O", &cap) ? get(cap) : NULL;
}

#define SYM(field, name)                                  \
    do {                                                  \
        *(void **)(&n->field) = dlsym(n->dl, name);       \
        if (!n->field) {                                  \
            missing = name;                               \
            goto fail;                                    \
        }                                                 \
    } while (0)

/* pg_open(libpath, conninfo) -> (capsule, None, None) | (None, "library" | "connect", message bytes) */
static PyObject *pg_open(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *conninfo;
    if (!PyArg_ParseTuple(args, "yy", &path, &conninfo))
        return NULL;
    native_t *n = calloc(1, sizeof *n);
    if (!n)
        return PyErr_NoMemory();
    const char *missing = NULL;
    n->engine = ENGINE_PG;
    n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl) {
        const char *e = dlerror();
        PyObject *r = Py_BuildValue("(Osy)", Py_None, "library", e ? e : "dlopen failed");
        free(n);
        return r;
    }
    SYM(connectdb, "PQconnectdb"); SYM(status, "PQstatus"); SYM(errmsg, "PQerrorMessage");
    SYM(finish, "PQfinish"); SYM(exec, "PQexec"); SYM(prepare, "PQprepare");
    SYM(exec_prepared, "PQexecPrepared"); SYM(rstatus, "PQresultStatus"); SYM(rfield, "PQresultErrorField");
    SYM(rmsg, "PQresultErrorMessage"); SYM(ntuples, "PQntuples"); SYM(clear, "PQclear");
    SYM(txstatus, "PQtransactionStatus");
    PyObject *r;
    void *c;
    Py_BEGIN_ALLOW_THREADS
    c = n->connectdb(conninfo);
    Py_END_ALLOW_THREADS
    if (!c) {
        free(n);
        return Py_BuildValue("(Osy)", Py_None, "connect", "libpq: out of memory");
    }
    if (n->status(c) != CONNECTION_OK) {
        const char *m = n->errmsg(c);
        r = Py_BuildValue("(Osy)", Py_None, "connect", m ? m : "connection failed");
        n->finish(c);
        free(n);
        return r;
    }
    n->conn = c;
    PyObject *cap = PyCapsule_New(n, CAPSULE, destroy);
    if (!cap) {
        close_native(n);
        free(n);
        return NULL;
    }
    return Py_BuildValue("(NOO)", cap, Py_None, Py_None);
fail:
    r = Py_BuildValue("(Osy)", Py_None, "library", missing);
    free(n);
    return r;
}

/* my_open(libpath, host|None, user, password, db|None, port, socket|None, timeout_s)
 * -> (capsule, None, None) | (None, "library", message bytes) | (None, "connect", (errno, message bytes)) */
static PyObject *my_open(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *host, *user, *pw, *db, *sock;
    unsigned int port, timeout;
    if (!PyArg_ParseTuple(args, "yzyyzIzI", &path, &host, &user, &pw, &db, &port, &sock, &timeout))
        return NULL;
    native_t *n = calloc(1, sizeof *n);
    if (!n)
        return PyErr_NoMemory();
    const char *missing = NULL;
    n->engine = ENGINE_MY;
    n->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl) {
        const char *e = dlerror();
        PyObject *r = Py_BuildValue("(Osy)", Py_None, "library", e ? e : "dlopen failed");
        free(n);
        return r;
    }
    SYM(m_init, "mysql_init"); SYM(m_options, "mysql_options"); SYM(m_connect, "mysql_real_connect");
    SYM(m_charset, "mysql_set_character_set"); SYM(m_close, "mysql_close"); SYM(m_errno, "mysql_errno");
    SYM(m_error, "mysql_error"); SYM(m_query, "mysql_real_query"); SYM(m_store, "mysql_store_result");
    SYM(m_free, "mysql_free_result"); SYM(m_field_count, "mysql_field_count");
    SYM(s_init, "mysql_stmt_init"); SYM(s_prepare, "mysql_stmt_prepare");
    SYM(s_param_count, "mysql_stmt_param_count"); SYM(s_bind, "mysql_stmt_bind_param");
    SYM(s_execute, "mysql_stmt_execute"); SYM(s_store, "mysql_stmt_store_result");
    SYM(s_free_result, "mysql_stmt_free_result"); SYM(s_close, "mysql_stmt_close");
    SYM(s_num_rows, "mysql_stmt_num_rows"); SYM(s_errno, "mysql_stmt_errno"); SYM(s_error, "mysql_stmt_error");
    SYM(s_field_count, "mysql_stmt_field_count");
    PyObject *r;
    void *m = n->m_init(NULL);
    if (!m) {
        free(n);
        return Py_BuildValue("(Os(Iy))", Py_None, "connect", 2008u, "libmariadb: out of memory");
    }
    if (n->m_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout)) {
        n->m_close(m);
        free(n);
        return Py_BuildValue("(Osy)", Py_None, "library", "mysql_options(MYSQL_OPT_CONNECT_TIMEOUT) failed");
    }
    void *ok;
    Py_BEGIN_ALLOW_THREADS
    ok = n->m_connect(m, host, user, pw, db, port, sock, 0);
    Py_END_ALLOW_THREADS
    if (!ok) {
        const char *e = n->m_error(m);
        r = Py_BuildValue("(Os(Iy))", Py_None, "connect", n->m_errno(m), e ? e : "");
        n->m_close(m);
        free(n);
        return r;
    }
    n->conn = m;
    if (n->m_charset(m, "utf8mb4")) {
        r = Py_BuildValue("(Os(Iy))", Py_None, "connect", n->m_errno(m), n->m_error(m) ? n->m_error(m) : "");
        close_native(n);
        free(n);
        return r;
    }
    PyObject *cap = PyCapsule_New(n, CAPSULE, destroy);
    if (!cap) {
        close_native(n);
        free(n);
        return NULL;
    }
    return Py_BuildValue("(NOO)", cap, Py_None, Py_None);
fail:
    r = Py_BuildValue("(Osy)", Py_None, "library", missing);
    free(n);
    return r;
}

/* The error of the last call: (code bytes, message bytes, lost bool). PostgreSQL: SQLSTATE of res (or
 * none), lost when the connection's status is bad. MySQL: errno as text (lost is decided from it by the
 * engine's mapping). */
static PyObject *pg_error(native_t *n, void *res) {
    const char *code = res ? n->rfield(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? n->rmsg(res) : NULL;
    if (!msg || !*msg)
        msg = n->errmsg(n->conn);
    return Py_BuildValue("(yyO)", code ? code : "", msg ? msg : "", n->status(n->conn) != CONNECTION_OK ? Py_True
                                                                                                   : Py_False);
}

static PyObject *my_error(native_t *n, void *mst) {
    unsigned int e = mst ? n->s_errno(mst) : n->m_errno(n->conn);
    const char *msg = mst ? n->s_error(mst) : n->m_error(n->conn);
    char code[16];
    snprintf(code, sizeof code, "%u", e);
    return Py_BuildValue("(yyO)", code, msg ? msg : "", Py_False);
}

/* Statement calls return NULL on success, else a new reference to the error tuple, or FAILED when
 * building that tuple failed (a Python exception is set). */
static PyObject failed_obj;
#define FAILED (&failed_obj)
static PyObject *or_failed(PyObject *e) { return e ? e : FAILED; }

/* One text statement. */
static PyObject *simple(native_t *n, const char *sql, long long *rows) {
    if (n->engine == ENGINE_PG) {
        void *res = n->exec(n->conn, sql);
        int s = res ? n->rstatus(res) : -1;
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && s != PGRES_EMPTY_QUERY) {
            PyObject *e = or_failed(pg_error(n, res));
            if (res)
                n->clear(res);
            return e;
        }
        if (rows)
            *rows += n->ntuples(res);
        n->clear(res);
        return NULL;
    }
    if (n->m_query(n->conn, sql, (unsigned long)strlen(sql)))
        return or_failed(my_error(n, NULL));
    void *res = n->m_store(n->conn);
    if (!res) {
        if (n->m_field_count(n->conn))
            return or_failed(my_error(n, NULL));
        return NULL;
    }
    /* text results of control statements are not counted: mysql_num_rows is not among the symbols */
    n->m_free(res);
    return NULL;
}

/* MySQL: one prepared control statement (no parameters; a result, if any, is read and dropped). */
static PyObject *my_simple_prepared(native_t *n, void *m) {
    if (n->s_execute(m))
        return or_failed(my_error(n, m));
    if (n->s_field_count(m)) {
        if (n->s_store(m)) {
            PyObject *e = or_failed(my_error(n, m));
            n->s_free_result(m);
            return e;
        }
        n->s_free_result(m);
    }
    return NULL;
}

/* MySQL: prepare each OP_SIMPLE text of the loaded program; a text the server will not prepare (error
 * 1295, or one the run will report) stays a text. */
static void my_prepare_texts(native_t *n) {
    for (int i = 0; n->engine == ENGINE_MY && i < n->ntexts && i < MAX_STMTS; i++) {
        void *m = n->s_init(n->conn);
        if (!m)
            return;
        if (n->s_prepare(m, n->texts[i], (unsigned long)strlen(n->texts[i])) || n->s_param_count(m) != 0) {
            n->s_close(m);
            continue;
        }
        n->tst[i] = m;
    }
}

/* exec_simple(cap, sql) -> None | (code, message, lost) */
static PyObject *exec_simple(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    const char *sql;
    if (!PyArg_ParseTuple(args, "Oy", &cap, &sql))
        return NULL;
    native_t *n = get(cap);
    if (!n)
        return NULL;
    PyObject *e = simple(n, sql, NULL);
    if (e == NULL)
        Py_RETURN_NONE;
    return e == FAILED ? NULL : e;
}

/* prepare(cap, sql, nparams) -> (index, None) | (None, error) */
static PyObject *prepare(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    const char *sql;
    int np;
    if (!PyArg_ParseTuple(args, "Oyi", &cap, &sql, &np))
        return NULL;
    native_t *n = get(cap);
    if (!n)
        return NULL;
    if (n->nstmts >= MAX_STMTS || np < 0 || np > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "prepare: too many statements or parameters");
        return NULL;
    }
    int i = n->nstmts;
    stmt_t *s = &n->st[i];
    memset(s, 0, sizeof *s);
    s->nparams = np;
    if (n->engine == ENGINE_PG) {
        snprintf(s->name, sizeof s->name, "dbdiag_n%d", i);
        void *res = n->prepare(n->conn, s->name, sql, np, NULL);
        int st = res ? n->rstatus(res) : -1;
        if (st != PGRES_COMMAND_OK) {
            PyObject *e = pg_error(n, res);
            if (res)
                n->clear(res);
            return Py_BuildValue("(ON)", Py_None, e);
        }
        n->clear(res);
        n->nstmts++;
        return Py_BuildValue("(iO)", i, Py_None);
    }
    void *m = n->s_init(n->conn);
    if (!m)
        return Py_BuildValue("(ON)", Py_None, my_error(n, NULL));
    if (n->s_prepare(m, sql, (unsigned long)strlen(sql))) {
        PyObject *e = my_error(n, m);
        n->s_close(m);
        return Py_BuildValue("(ON)", Py_None, e);
    }
    if ((int)n->s_param_count(m) != np) {
        n->s_close(m);
        PyErr_SetString(PyExc_ValueError, "prepare: the server counts another number of parameters");
        return NULL;
    }
    s->mst = m;
    s->has_rows = n->s_field_count(m) > 0;
    int k = np ? np : 1;
    s->bind = calloc(k, sizeof *s->bind);
    s->ints = calloc(k, sizeof *s->ints);
    s->lens = calloc(k, sizeof *s->lens);
    s->sbuf = calloc(k, sizeof *s->sbuf);
    if (!s->bind || !s->ints || !s->lens || !s->sbuf) { /* not registered: nothing may read it */
        free(s->bind);
        free(s->ints);
        free(s->lens);
        free(s->sbuf);
        n->s_close(m);
        memset(s, 0, sizeof *s);
        return PyErr_NoMemory();
    }
    n->nstmts++; /* from here close_native frees what was allocated */
    return Py_BuildValue("(iO)", i, Py_None);
}

/* Check the program as the loop will read it; -1 with ValueError set on the first problem. */
static int verify(native_t *n, const int64_t *p, Py_ssize_t len) {
    int depth = 0;
    Py_ssize_t pc = 0;
#define BAD(msg)                                                            \
    do {                                                                    \
        PyErr_Format(PyExc_ValueError, "native program: %s at word %zd", msg, pc); \
        return -1;                                                          \
    } while (0)
    while (pc < len) {
        int64_t op = p[pc];
        switch (op) {
        case OP_CONST:
            if (pc + 1 >= len) BAD("truncated");
            depth++;
            pc += 2;
            break;
        case OP_VAR:
            if (pc + 1 >= len || p[pc + 1] < 0 || p[pc + 1] >= n->nvars) BAD("bad variable");
            depth++;
            pc += 2;
            break;
        case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_FDIV: case OP_MOD: case OP_RANDOM:
            if (depth < 2) BAD("stack underflow");
            depth--;
            pc++;
            break;
        case OP_NEG: case OP_ABS:
            if (depth < 1) BAD("stack underflow");
            pc++;
            break;
        case OP_LEAST: case OP_GREATEST:
            if (pc + 1 >= len || p[pc + 1] < 1 || p[pc + 1] > depth) BAD("bad argument count");
            depth -= (int)p[pc + 1] - 1;
            pc += 2;
            break;
        case OP_STORE:
            if (pc + 1 >= len || p[pc + 1] < 0 || p[pc + 1] >= n->nvars) BAD("bad variable");
            if (depth != 1) BAD("store needs exactly one value");
            depth = 0;
            pc += 2;
            break;
        case OP_EXEC: {
            if (depth) BAD("values left on the stack");
            if (pc + 2 >= len || p[pc + 1] < 0 || p[pc + 1] >= n->nstmts) BAD("bad statement");
            int64_t np = p[pc + 2];
            if (np != n->st[p[pc + 1]].nparams || pc + 3 + 2 * np > len)
                BAD("bad parameter count");
            for (int64_t j = 0; j < np; j++) {
                int64_t kind = p[pc + 3 + 2 * j], var = p[pc + 4 + 2 * j];
                if (kind < 0 || kind > n->npools) BAD("bad parameter kind");
                if (var < 0 || var >= n->nvars) BAD("bad parameter variable");
            }
            pc += 3 + 2 * np;
            break;
        }
        case OP_SIMPLE:
            if (depth) BAD("values left on the stack");
            if (pc + 1 >= len || p[pc + 1] < 0 || p[pc + 1] >= n->ntexts) BAD("bad text");
            pc += 2;
            break;
        default:
            BAD("unknown op");
        }
        if (depth > MAX_STACK) BAD("stack overflow");
    }
    if (depth) BAD("values left on the stack");
    return 0;
#undef BAD
}

static char *dup_bytes(PyObject *b, unsigned long *len) {
    char *buf;
    Py_ssize_t l;
    if (PyBytes_AsStringAndSize(b, &buf, &l) < 0)
        return NULL;
    if (l > MAX_STR || (Py_ssize_t)strlen(buf) != l) {
        PyErr_SetString(PyExc_ValueError, "native program: a string is too long or holds a NUL byte");
        return NULL;
    }
    char *d = malloc(l + 1);
    if (!d) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(d, buf, l + 1);
    if (len)
        *len = (unsigned long)l;
    return d;
}

/* load(cap, program (int64 buffer), texts tuple[bytes], pools tuple[tuple[bytes]], nvars) -> None */
static PyObject *load(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *texts, *pools;
    Py_buffer prog;
    int nvars;
    if (!PyArg_ParseTuple(args, "Oy*O!O!i", &cap, &prog, &PyTuple_Type, &texts, &PyTuple_Type, &pools, &nvars))
        return NULL;
    PyObject *ret = NULL;
    native_t *n = get(cap);
    if (!n)
        goto done;
    free_program(n);
    Py_ssize_t words = prog.len / (Py_ssize_t)sizeof(int64_t);
    if (prog.len % (Py_ssize_t)sizeof(int64_t) || words < 1 || words > MAX_PROG || nvars < 0 || nvars > MAX_VARS ||
        PyTuple_GET_SIZE(texts) > MAX_STMTS || PyTuple_GET_SIZE(pools) > 16) {
        PyErr_SetString(PyExc_ValueError, "native program: bad size");
        goto done;
    }
    n->nvars = nvars;
    n->ntexts = (int)PyTuple_GET_SIZE(texts);
    n->texts = calloc(n->ntexts ? n->ntexts : 1, sizeof(char *));
    if (!n->texts) {
        n->ntexts = 0;
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n->ntexts; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(texts, i))) {
            PyErr_SetString(PyExc_TypeError, "native program: texts must be bytes");
            goto done;
        }
        if (!(n->texts[i] = dup_bytes(PyTuple_GET_ITEM(texts, i), NULL)))
            goto done;
    }
    int np = (int)PyTuple_GET_SIZE(pools);
    n->pools = calloc(np ? np : 1, sizeof(char **));
    n->pool_n = calloc(np ? np : 1, sizeof(int));
    n->pool_len = calloc(np ? np : 1, sizeof(unsigned long *));
    if (!n->pools || !n->pool_n || !n->pool_len) {
        PyErr_NoMemory();
        goto done;
    }
    n->npools = np;
    for (int p = 0; p < np; p++) {
        PyObject *pool = PyTuple_GET_ITEM(pools, p);
        if (!PyTuple_Check(pool) || PyTuple_GET_SIZE(pool) < 1 || PyTuple_GET_SIZE(pool) > 1000000) {
            PyErr_SetString(PyExc_ValueError, "native program: a pool must be a non-empty tuple of bytes");
            goto done;
        }
        int k = (int)PyTuple_GET_SIZE(pool);
        n->pools[p] = calloc(k, sizeof(char *));
        n->pool_len[p] = calloc(k, sizeof(unsigned long));
        if (!n->pools[p] || !n->pool_len[p]) {
            PyErr_NoMemory();
            goto done;
        }
        n->pool_n[p] = k; /* from here free_program frees what is there (calloc'd NULLs are fine) */
        for (int i = 0; i < k; i++) {
            PyObject *b = PyTuple_GET_ITEM(pool, i);
            if (!PyBytes_Check(b)) {
                PyErr_SetString(PyExc_TypeError, "native program: pool strings must be bytes");
                goto done;
            }
            if (!(n->pools[p][i] = dup_bytes(b, &n->pool_len[p][i])))
                goto done;
        }
    }
    if (verify(n, (const int64_t *)prog.buf, words) < 0)
        goto done;
    n->prog = malloc(prog.len);
    if (!n->prog) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(n->prog, prog.buf, prog.len);
    n->nprog = words;
    n->nexec = 0;
    for (Py_ssize_t pc = 0; pc < n->nprog;) {
        int64_t op = n->prog[pc];
        n->nexec += op == OP_EXEC || op == OP_SIMPLE;
        pc += op == OP_EXEC ? 3 + 2 * n->prog[pc + 2] : (op == OP_CONST || op == OP_VAR || op == OP_LEAST ||
                                                         op == OP_GREATEST || op == OP_STORE || op == OP_SIMPLE) ? 2 : 1;
    }
    n->shist = calloc((size_t)(n->nexec ? n->nexec : 1) * SH_BINS, sizeof *n->shist);
    n->sover = calloc(2 * SH_OVER, sizeof *n->sover);
    if (!n->shist || !n->sover) {
        PyErr_NoMemory();
        goto done;
    }
    /* MySQL: bind each statement's parameters once; the loop writes only values and lengths. */
    for (int i = 0; n->engine == ENGINE_MY && i < n->nstmts; i++) {
        stmt_t *s = &n->st[i];
        for (int j = 0; j < s->nparams; j++) {
            my_bind_t *b = &s->bind[j];
            memset(b, 0, sizeof *b);
            b->buffer_type = MYSQL_TYPE_LONGLONG;
            b->buffer = &s->ints[j];
        }
    }
    /* string parameters: find them in the program and give those binds a string buffer */
    for (Py_ssize_t pc = 0; n->engine == ENGINE_MY && pc < n->nprog;) {
        int64_t op = n->prog[pc];
        if (op == OP_EXEC) {
            stmt_t *s = &n->st[n->prog[pc + 1]];
            int64_t k = n->prog[pc + 2];
            for (int64_t j = 0; j < k; j++) {
                if (n->prog[pc + 3 + 2 * j] > 0) {
                    if (!s->sbuf[j] && !(s->sbuf[j] = malloc(MAX_STR + 1))) {
                        PyErr_NoMemory();
                        goto done;
                    }
                    my_bind_t *b = &s->bind[j];
                    b->buffer_type = MYSQL_TYPE_STRING;
                    b->buffer = s->sbuf[j];
                    b->buffer_length = MAX_STR;
                    b->length = &s->lens[j];
                }
            }
            pc += 3 + 2 * k;
        } else if (op == OP_CONST || op == OP_VAR || op == OP_LEAST || op == OP_GREATEST || op == OP_STORE ||
                   op == OP_SIMPLE) {
            pc += 2;
        } else {
            pc++;
        }
    }
    for (int i = 0; n->engine == ENGINE_MY && i < n->nstmts; i++) {
        stmt_t *s = &n->st[i];
        if (s->nparams && n->s_bind(s->mst, s->bind)) {
            PyErr_SetString(PyExc_ValueError, "native program: mysql_stmt_bind_param failed");
            goto done;
        }
    }
    my_prepare_texts(n);
    ret = Py_None;
    Py_INCREF(ret);
done:
    if (!ret && n)
        free_program(n);
    PyBuffer_Release(&prog);
    return ret;
}

/* The error of a \set expression: (b"script", message, False). */
static PyObject *script_error(const char *msg) { return or_failed(Py_BuildValue("(yyO)", "script", msg, Py_False)); }

/* Run one prepared statement with the current variables; NULL on success, else the error tuple. Its time
 * (s->ns) is counted by the caller, which reads the clock once per statement. */
static PyObject *run_stmt(native_t *n, stmt_t *s, const int64_t *pp, const int64_t *vars) {
    int np = s->nparams;
    if (n->engine == ENGINE_PG) {
        char ibuf[MAX_PARAMS][24];
        const char *values[MAX_PARAMS];
        for (int j = 0; j < np; j++) {
            int64_t kind = pp[2 * j], v = vars[pp[2 * j + 1]];
            if (kind == 0) {
                snprintf(ibuf[j], sizeof ibuf[j], "%lld", (long long)v);
                values[j] = ibuf[j];
            } else {
                int k = n->pool_n[kind - 1];
                values[j] = n->pools[kind - 1][((v % k) + k) % k];
            }
        }
        void *res = n->exec_prepared(n->conn, s->name, np, values, NULL, NULL, 0);
        int st = res ? n->rstatus(res) : -1;
        if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
            PyObject *e = or_failed(pg_error(n, res));
            if (res)
                n->clear(res);
            return e;
        }
        s->rows += n->ntuples(res);
        n->clear(res);
    } else {
        for (int j = 0; j < np; j++) {
            int64_t kind = pp[2 * j], v = vars[pp[2 * j + 1]];
            if (kind == 0) {
                s->ints[j] = v;
            } else {
                int k = n->pool_n[kind - 1];
                int idx = (int)(((v % k) + k) % k);
                memcpy(s->sbuf[j], n->pools[kind - 1][idx], n->pool_len[kind - 1][idx]);
                s->lens[j] = n->pool_len[kind - 1][idx];
            }
        }
        if (n->s_execute(s->mst))
            return or_failed(my_error(n, s->mst));
        if (s->has_rows) {
            if (n->s_store(s->mst)) {
                PyObject *e = or_failed(my_error(n, s->mst));
                n->s_free_result(s->mst);
                return e;
            }
            s->rows += (long long)n->s_num_rows(s->mst);
            n->s_free_result(s->mst);
        }
    }
    s->execs++;
    return NULL;
}

/* One statement's latency into its slot's counts (keep: the batch keeps statement latencies). */
static inline void count_latency(native_t *n, int slot, int64_t ns) {
    int64_t us = ns / 1000;
    if (us < SH_BINS) {
        n->shist[(size_t)slot * SH_BINS + (us > 0 ? us : 0)]++;
    } else {
        n->sover[2 * n->nover] = slot;
        n->sover[2 * n->nover + 1] = us;
        n->nover++;
    }
}

/* After a failed statement: leave no transaction open (the next transaction starts clean, as the
 * Python loop's after_error does). Errors here are ignored: the statement's error is the one reported,
 * and a lost connection shows in it. */
static void rollback(native_t *n) {
    if (n->engine == ENGINE_PG) {
        if (n->status(n->conn) == CONNECTION_OK && n->txstatus(n->conn) != PQTRANS_IDLE) {
            void *res = n->exec(n->conn, "ROLLBACK");
            if (res)
                n->clear(res);
        }
        return;
    }
    if (!n->m_query(n->conn, "ROLLBACK", 8)) {
        void *res = n->m_store(n->conn);
        if (res)
            n->m_free(res);
    }
}

/* One transaction: the whole program, from *t (the previous transaction's end, ns); *t is then when its
 * last statement ended. Each statement is timed from the end of the one before (the first from *t): one
 * clock read per statement; keep: count them (count_latency). NULL on success, else the error tuple. */
static PyObject *run_once(native_t *n, uint64_t *state, int64_t *vars, long long *simple_rows, int64_t *t,
                          int keep) {
    int64_t stack[MAX_STACK + 1];
    int64_t ts = *t, te;
    int sp = 0, slot = 0;
    const int64_t *p = n->prog;
    Py_ssize_t pc = 0, len = n->nprog;
    while (pc < len) {
        switch (p[pc]) {
        case OP_CONST: stack[sp++] = p[pc + 1]; pc += 2; break;
        case OP_VAR: stack[sp++] = vars[p[pc + 1]]; pc += 2; break;
        case OP_ADD: sp--; stack[sp - 1] = (int64_t)((uint64_t)stack[sp - 1] + (uint64_t)stack[sp]); pc++; break;
        case OP_SUB: sp--; stack[sp - 1] = (int64_t)((uint64_t)stack[sp - 1] - (uint64_t)stack[sp]); pc++; break;
        case OP_MUL: sp--; stack[sp - 1] = (int64_t)((uint64_t)stack[sp - 1] * (uint64_t)stack[sp]); pc++; break;
        case OP_DIV: case OP_FDIV: case OP_MOD: {
            int64_t b = stack[--sp], a = stack[sp - 1];
            if (b == 0)
                return script_error("division by zero in a \\set expression");
            if (b == -1) { /* INT64_MIN / -1 overflows in C */
                stack[sp - 1] = p[pc] == OP_MOD ? 0 : (int64_t)(0 - (uint64_t)a);
            } else if (p[pc] == OP_DIV) { /* pgbench: truncates toward zero, as C does */
                stack[sp - 1] = a / b;
            } else { /* Python's // and %: floor */
                int64_t q = a / b, r = a % b;
                if (r != 0 && ((r < 0) != (b < 0))) {
                    q -= 1;
                    r += b;
                }
                stack[sp - 1] = p[pc] == OP_FDIV ? q : r;
            }
            pc++;
            break;
        }
        case OP_NEG: stack[sp - 1] = (int64_t)(0 - (uint64_t)stack[sp - 1]); pc++; break;
        case OP_ABS: if (stack[sp - 1] < 0) stack[sp - 1] = (int64_t)(0 - (uint64_t)stack[sp - 1]); pc++; break;
        case OP_LEAST: case OP_GREATEST: {
            int k = (int)p[pc + 1];
            int64_t v = stack[sp - k];
            for (int j = sp - k + 1; j < sp; j++)
                v = p[pc] == OP_LEAST ? (stack[j] < v ? stack[j] : v) : (stack[j] > v ? stack[j] : v);
            sp -= k;
            stack[sp++] = v;
            pc += 2;
            break;
        }
        case OP_RANDOM: {
            int64_t hi = stack[--sp], lo = stack[sp - 1];
            if (hi < lo)
                return script_error("random(lo, hi): the upper bound is below the lower one");
            stack[sp - 1] = draw(state, lo, (uint64_t)hi - (uint64_t)lo + 1);
            pc++;
            break;
        }
        case OP_STORE: vars[p[pc + 1]] = stack[--sp]; pc += 2; break;
        case OP_EXEC: {
            stmt_t *s = &n->st[p[pc + 1]];
            PyObject *e = run_stmt(n, s, p + pc + 3, vars);
            if (e)
                return e;
            te = now_ns();
            s->ns += te - ts;
            if (keep)
                count_latency(n, slot, te - ts);
            slot++;
            *t = ts = te;
            pc += 3 + 2 * p[pc + 2];
            break;
        }
        case OP_SIMPLE: {
            void *m = n->tst[p[pc + 1]];
            PyObject *e = m ? my_simple_prepared(n, m) : simple(n, n->texts[p[pc + 1]], simple_rows);
            if (e)
                return e;
            te = now_ns();
            if (keep)
                count_latency(n, slot, te - ts);
            slot++;
            *t = ts = te;
            pc += 2;
            break;
        }
        default: /* verified at load: not reached */
            return script_error("native program: unknown op");
        }
    }
    return NULL;
}

/* run(cap, state, t0, until_ns, lat[, keep]) -> (n, t_last, error)
 * Transactions until the monotonic clock reaches until_ns or lat (an int64 buffer) is full; one latency
 * (ns, from the previous transaction's end, the first from t0; t0 0: from now) per transaction. keep: count
 * each statement's latency for drain(); the batch also ends when the long ones' store could not take
 * another transaction's. error: None, or (code bytes, message bytes, lost) of the failed transaction,
 * already rolled back; t_last is then when that transaction started. state: a writable 8-byte buffer (the
 * generator's state). */
static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    Py_buffer st, lat;
    long long t0, until;
    int keep = 0;
    if (!PyArg_ParseTuple(args, "Ow*LLw*|p", &cap, &st, &t0, &until, &lat, &keep))
        return NULL;
    PyObject *ret = NULL;
    native_t *n = get(cap);
    if (!n)
        goto done;
    if (st.len < 8 || !n->prog || lat.len < (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "run: bad arguments or no program loaded");
        goto done;
    }
    uint64_t *state = (uint64_t *)st.buf;
    int64_t *out = (int64_t *)lat.buf;
    int64_t vars[MAX_VARS];
    memset(vars, 0, sizeof vars);
    Py_ssize_t cap_n = lat.len / (Py_ssize_t)sizeof(int64_t), k = 0;
    long long simple_rows = 0;
    PyObject *err = NULL;
    if (t0 == 0)
        t0 = now_ns();
    int64_t t1 = t0;
    while (k < cap_n && (!keep || n->nover + n->nexec <= SH_OVER)) {
        int64_t t = t0;
        err = run_once(n, state, vars, &simple_rows, &t, keep);
        if (err) {
            rollback(n);
            break;
        }
        /* The last statement's end is the transaction's (what follows it is arithmetic); a program
         * without statements reads the clock here. */
        t1 = n->nexec ? t : now_ns();
        out[k++] = t1 - t0;
        t0 = t1;
        if (t1 >= until)
            break;
    }
    if (err == FAILED) /* building the error tuple failed: its exception goes up */
        goto done;
    if (!err) {
        err = Py_None;
        Py_INCREF(err);
    }
    ret = Py_BuildValue("(nLN)", k, (long long)t1, err);
done:
    PyBuffer_Release(&st);
    PyBuffer_Release(&lat);
    return ret;
}

/* drain(cap) -> tuple (one per statement slot, program order) of {µs: count} counted by run(keep) since
 * the last drain; the counts are emptied. */
static PyObject *drain(PyObject *self, PyObject *args) {
    (void)self;
    native_t *n = get_arg(args);
    if (!n)
        return NULL;
    if (!n->shist) {
        PyErr_SetString(PyExc_ValueError, "drain: no program loaded");
        return NULL;
    }
    PyObject *t = PyTuple_New(n->nexec);
    if (!t)
        return NULL;
    for (int j = 0; j < n->nexec; j++) {
        PyObject *d = PyDict_New();
        if (!d)
            goto fail;
        PyTuple_SET_ITEM(t, j, d);
        uint32_t *h = n->shist + (size_t)j * SH_BINS;
        for (int us = 0; us < SH_BINS; us++) {
            if (!h[us])
                continue;
            PyObject *k = PyLong_FromLong(us), *v = PyLong_FromUnsignedLong(h[us]);
            int bad = !k || !v || PyDict_SetItem(d, k, v) < 0;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad)
                goto fail;
        }
    }
    for (int i = 0; i < n->nover; i++) {
        PyObject *d = PyTuple_GET_ITEM(t, (Py_ssize_t)n->sover[2 * i]);
        PyObject *k = PyLong_FromLongLong(n->sover[2 * i + 1]);
        if (!k)
            goto fail;
        PyObject *old = PyDict_GetItemWithError(d, k);
        long long c = old ? PyLong_AsLongLong(old) + 1 : 1;
        PyObject *v = PyErr_Occurred() ? NULL : PyLong_FromLongLong(c);
        int bad = !v || PyDict_SetItem(d, k, v) < 0;
        Py_DECREF(k);
        Py_XDECREF(v);
        if (bad)
            goto fail;
    }
    memset(n->shist, 0, (size_t)(n->nexec ? n->nexec : 1) * SH_BINS * sizeof *n->shist);
    n->nover = 0;
    return t;
fail:
    Py_DECREF(t);
    return NULL;
}

/* stats(cap) -> tuple of (executions, result rows, ns) per prepared statement, in prepare order */
static PyObject *stats(PyObject *self, PyObject *args) {
    (void)self;
    native_t *n = get_arg(args);
    if (!n)
        return NULL;
    PyObject *t = PyTuple_New(n->nstmts);
    if (!t)
        return NULL;
    for (int i = 0; i < n->nstmts; i++) {
        PyObject *e = Py_BuildValue("(LLL)", n->st[i].execs, n->st[i].rows, n->st[i].ns);
        if (!e) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, e);
    }
    return t;
}

static PyObject *close_(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap))
        return NULL;
    native_t *n = PyCapsule_GetPointer(cap, CAPSULE);
    if (!n)
        return NULL;
    close_native(n);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"pg_open", pg_open, METH_VARARGS, "Connect through a libpq found at a path (see the module source)."},
    {"my_open", my_open, METH_VARARGS, "Connect through a libmariadb found at a path."},
    {"exec_simple", exec_simple, METH_VARARGS, "One text statement on the native connection."},
    {"prepare", prepare, METH_VARARGS, "Prepare a statement; its index."},
    {"load", load, METH_VARARGS, "Load (and check) the transaction program."},
    {"run", run, METH_VARARGS, "Run the program's transactions until a deadline."},
    {"drain", drain, METH_VARARGS, "Per-statement latency counts since the last drain."},
    {"stats", stats, METH_VARARGS, "Per-statement executions, rows, ns."},
    {"close", close_, METH_VARARGS, "Close the native connection."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "workloads._native",
                                    "The native executor: transaction programs in C on its own connection.", -1,
                                    methods};

#ifndef NATIVE_SOURCE_DIGEST
#define NATIVE_SOURCE_DIGEST "" /* built without setup.py: no staleness check */
#endif

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_DIGEST", NATIVE_SOURCE_DIGEST) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    const struct { const char *name; long v; } ops[] = {
        {"OP_CONST", OP_CONST}, {"OP_VAR", OP_VAR}, {"OP_ADD", OP_ADD}, {"OP_SUB", OP_SUB}, {"OP_MUL", OP_MUL},
        {"OP_DIV", OP_DIV}, {"OP_FDIV", OP_FDIV}, {"OP_MOD", OP_MOD}, {"OP_NEG", OP_NEG}, {"OP_ABS", OP_ABS},
        {"OP_LEAST", OP_LEAST}, {"OP_GREATEST", OP_GREATEST}, {"OP_RANDOM", OP_RANDOM}, {"OP_STORE", OP_STORE},
        {"OP_EXEC", OP_EXEC}, {"OP_SIMPLE", OP_SIMPLE}, {"MAX_STR", MAX_STR}, {"MAX_VARS", MAX_VARS},
        {"MAX_STMTS", MAX_STMTS}, {"MAX_PARAMS", MAX_PARAMS}, {"MAX_PROG", MAX_PROG}, {"MAX_STACK", MAX_STACK}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (PyModule_AddIntConstant(m, ops[i].name, ops[i].v) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}

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
 * The Python side (workloads/native/native.py) validates the program before load(); load() checks it again
 * (every index in range, the stack never under- or overflows), so a bad program is a ValueError,
 * never a wild read. Every library call's return is checked.
 *
 * Program: int64 words. Expression ops push/pop an int64 stack (as pgbench's \set: + - * / % with
 * pgbench's truncating division, unary minus, abs, least/greatest, random(lo, hi) uniform inclusive);
 * OP_STORE pops into a variable; OP_EXEC runs a prepared statement with parameters taken from
 * variables (an integer, or a string of a pool picked by the variable's value); OP_SIMPLE sends one
 * text statement (BEGIN, COMMIT, ...). One run of the program is one transaction.
 *
 * Control flow and results (client-side TPC-C): OP_JMP / OP_JZ jump to a word index (the loader checks
 * every target is an instruction reached with an empty stack); OP_ROWS, OP_COL and OP_SCOL read the last
 * OP_EXEC's result (its row count, a value as an integer scaled by 10^k, a text into a string register);
 * OP_VARX / OP_STOREX index variables, OP_SORT sorts records of variables, OP_SEQ compares a string
 * register with a literal, OP_FMT builds a string register, OP_TALLY counts a named outcome. The operand
 * layout is in workloads/native/opcodes.py. A transaction may take at most MAX_JUMPS jumps (a loop that never
 * ends is an error, not a hang).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_CONST = 1, OP_VAR, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_NEG, OP_ABS, OP_LEAST,
       OP_GREATEST, OP_RANDOM, OP_STORE, OP_EXEC, OP_SIMPLE, OP_JMP, OP_JZ, OP_LT, OP_EQ, OP_OR, OP_ROWS, OP_COL,
       OP_SCOL, OP_VARX, OP_STOREX, OP_SORT, OP_SEQ, OP_FMT, OP_TALLY };
enum { P_INT = 0, P_CENTS = -1, P_SREG = -2 };             /* OP_EXEC parameter kinds; pool p is p + 1 */
enum { F_INT = 0, F_CENTS = 1, F_SREG = 2, F_LIT = 3 };    /* OP_FMT part kinds */
#define MAX_STACK 64
#define MAX_VARS 256
#define MAX_STMTS 64
#define MAX_PARAMS 32
#define MAX_PROG 8192
#define MAX_STR 1024
#define MAX_COLS 32
#define MAX_SREGS 8
#define MAX_TALLY 8
#define MAX_SCALE 18
#define MAX_DIGITS 18
#define MAX_JUMPS 100000
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
typedef char *(*pq_getvalue_t)(const void *, int, int);
typedef int (*pq_getcell_t)(const void *, int, int);
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
typedef char (*my_stmt_bind_result_t)(void *, my_bind_t *);
typedef void (*my_stmt_data_seek_t)(void *, unsigned long long);
#define MYSQL_NO_DATA 100
#define MYSQL_OPT_CONNECT_TIMEOUT 0
#define MYSQL_OPT_NONBLOCK 6000
#define MYSQL_WAIT_READ 1
#define MYSQL_WAIT_WRITE 2
#define MYSQL_WAIT_EXCEPT 4
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
    /* MySQL: result columns bound as strings (ncols <= MAX_COLS), fetched only when a program reads them */
    int ncols;
    my_bind_t *rbind;
    char *rbuf; /* ncols * (MAX_STR + 1) */
    unsigned long *rlen;
    char *rnull, *rerr;
} stmt_t;

/* Where a transaction is in its program: resumable at a statement (the stack is empty there: verify checks
 * it), which is what lets mx_run keep one in flight on each of many connections. */
typedef struct {
    Py_ssize_t pc;
    int jumps;
    long long sent, tally[MAX_TALLY];
    int64_t ts; /* the current statement's start: the previous statement's end, or the transaction's start */
} txn_t;

typedef struct {
    int engine;
    void *dl;
    void *conn;
    /* libpq */
    pq_connectdb_t connectdb; pq_status_t status; pq_error_message_t errmsg; pq_finish_t finish; pq_exec_t exec;
    pq_prepare_t prepare; pq_exec_prepared_t exec_prepared; pq_result_status_t rstatus;
    pq_result_error_field_t rfield; pq_result_error_message_t rmsg; pq_ntuples_t ntuples; pq_clear_t clear;
    pq_transaction_status_t txstatus; pq_getvalue_t getvalue; pq_getcell_t getisnull, getlength; pq_status_t nfields;
    /* libmariadb */
    my_init_t m_init; my_options_t m_options; my_real_connect_t m_connect; my_set_charset_t m_charset;
    my_close_t m_close; my_errno_t m_errno; my_error_t m_error; my_real_query_t m_query;
    my_store_result_t m_store; my_free_result_t m_free; my_field_count_t m_field_count;
    my_stmt_init_t s_init; my_stmt_prepare_t s_prepare; my_stmt_param_count_t s_param_count;
    my_stmt_bind_param_t s_bind; my_stmt_int_t s_execute, s_store; my_stmt_char_t s_free_result, s_close;
    my_stmt_num_rows_t s_num_rows; my_stmt_errno_t s_errno; my_stmt_error_t s_error;
    my_stmt_field_count_t s_field_count; my_stmt_bind_result_t s_bind_result; my_stmt_int_t s_fetch;
    my_stmt_data_seek_t s_data_seek;
    /* The server's id of the connection (PQbackendPID / mysql_thread_id), looked up without failing: it only
     * names a stuck session in a step's row (workloads.steps.stuck). */
    int (*backend_pid)(const void *);
    unsigned long (*thread_id)(void *);
    /* The last OP_EXEC's result, for OP_ROWS / OP_COL / OP_SCOL: PostgreSQL keeps the PGresult, MySQL the
     * statement whose stored result is kept (freed at the next statement or transaction). */
    void *last_res;
    stmt_t *last_st;
    long long last_rows, fetched_row;
    int has_last;
    char sreg[MAX_SREGS][MAX_STR + 1]; /* string registers */
    unsigned long sreg_len[MAX_SREGS];
    long long tally[MAX_TALLY]; /* OP_TALLY counts and statements of completed transactions, since counts() */
    long long sent;
    int *slot_of; /* per program word: the latency slot of the OP_EXEC / OP_SIMPLE there */
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
    /* Many connections per process (mx_run): the non-blocking calls, looked up without failing (NULL: this
     * library cannot be multiplexed), and where this connection's transaction is. */
    int (*pq_socket)(const void *);
    int (*pq_send_prepared)(void *, const char *, int, const char *const *, const int *, const int *, int);
    int (*pq_send_query)(void *, const char *);
    int (*pq_consume)(void *);
    int (*pq_busy)(void *);
    void *(*pq_get_result)(void *);
    int (*my_socket)(void *);
    int (*s_execute_start)(int *, void *), (*s_execute_cont)(int *, void *, int);
    int (*s_store_start)(int *, void *), (*s_store_cont)(int *, void *, int);
    int (*m_query_start)(int *, void *, const char *, unsigned long), (*m_query_cont)(int *, void *, int);
    int (*m_store_start)(void **, void *), (*m_store_cont)(void **, void *, int);
    int nonblock;      /* MySQL: opened with MYSQL_OPT_NONBLOCK */
    int mx_fresh;      /* set by mx_init: mx_run registers its socket anew (a closed one left epoll by itself) */
    int mx_phase;      /* MX_IDLE: no statement in flight; else what the one in flight waits for */
    int mx_wait;       /* MySQL: the status bits the last _start/_cont returned */
    void *mx_m;        /* MySQL: the MYSQL_STMT in flight (NULL: a text statement) */
    stmt_t *mx_st;     /* the program's statement in flight (NULL: an OP_SIMPLE) */
    void *mx_res;      /* PostgreSQL: the first result of the statement in flight */
    int64_t mx_t0;     /* the current transaction's start (ns; the previous one's end), 0: not started */
    txn_t mx_x;
    uint64_t mx_rng;
    int64_t mx_vars[MAX_VARS];
    /* Per-statement latencies, counted here rather than handed to Python one by one (that cost the
     * point-select loop about 0.2 µs per transaction): per slot, counts of 0..SH_BINS-1 µs, and the
     * longer ones as (slot, µs) pairs. drain() hands them out and empties them. */
    uint32_t *shist; /* nexec * SH_BINS */
    int64_t *sover;  /* cap_over pairs (SH_OVER at first) */
    int nover;
    int cap_over;
} native_t;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* splitmix64, as workloads/native/program.py's Draw (the Python reference interpreter) and tpcc_sp's replayed draws */
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

/* Forget the last OP_EXEC's result (its memory goes back: a PGresult, a MySQL stored result). */
static void drop_last(native_t *n) {
    if (n->last_res && n->clear)
        n->clear(n->last_res);
    if (n->last_st && n->s_free_result)
        n->s_free_result(n->last_st->mst);
    n->last_res = NULL;
    n->last_st = NULL;
    n->has_last = 0;
    n->last_rows = 0;
    n->fetched_row = -1;
}

/* The width in words of the instruction at pc (its operand counts were checked by verify, or are
 * checked by the caller against len). */
static Py_ssize_t op_width(const int64_t *p, Py_ssize_t pc, Py_ssize_t len) {
    switch (p[pc]) {
    case OP_EXEC: return pc + 2 < len && p[pc + 2] > 0 ? 3 + 2 * p[pc + 2] : 3;
    case OP_FMT: return pc + 3 < len && p[pc + 3] > 0 ? 4 + 2 * p[pc + 3] : 4;
    case OP_CONST: case OP_VAR: case OP_LEAST: case OP_GREATEST: case OP_STORE: case OP_SIMPLE: case OP_JMP:
    case OP_JZ: case OP_VARX: case OP_STOREX: case OP_TALLY: return 2;
    case OP_COL: case OP_SCOL: case OP_SORT: case OP_SEQ: return 3;
    default: return 1;
    }
}

static void free_program(native_t *n) {
    drop_last(n);
    free(n->slot_of);
    n->slot_of = NULL;
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
    n->cap_over = 0;
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
    if (n->mx_res && n->clear)
        n->clear(n->mx_res);
    n->mx_res = NULL;
    n->mx_phase = 0;
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
        free(s->rbind);
        free(s->rbuf);
        free(s->rlen);
        free(s->rnull);
        free(s->rerr);
        s->rbind = NULL;
        s->rbuf = NULL;
        s->rlen = NULL;
        s->rnull = s->rerr = NULL;
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
    SYM(txstatus, "PQtransactionStatus"); SYM(getvalue, "PQgetvalue"); SYM(getisnull, "PQgetisnull");
    SYM(getlength, "PQgetlength"); SYM(nfields, "PQnfields");
    *(void **)(&n->backend_pid) = dlsym(n->dl, "PQbackendPID");
    *(void **)(&n->pq_socket) = dlsym(n->dl, "PQsocket");
    *(void **)(&n->pq_send_prepared) = dlsym(n->dl, "PQsendQueryPrepared");
    *(void **)(&n->pq_send_query) = dlsym(n->dl, "PQsendQuery");
    *(void **)(&n->pq_consume) = dlsym(n->dl, "PQconsumeInput");
    *(void **)(&n->pq_busy) = dlsym(n->dl, "PQisBusy");
    *(void **)(&n->pq_get_result) = dlsym(n->dl, "PQgetResult");
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

/* my_open(libpath, host|None, user, password, db|None, port, socket|None, timeout_s[, nonblock])
 * nonblock: MYSQL_OPT_NONBLOCK, for mx_run (the blocking calls still work on such a connection)
 * -> (capsule, None, None) | (None, "library", message bytes) | (None, "connect", (errno, message bytes)) */
static PyObject *my_open(PyObject *self, PyObject *args) {
    (void)self;
    const char *path, *host, *user, *pw, *db, *sock;
    unsigned int port, timeout;
    int nonblock = 0;
    if (!PyArg_ParseTuple(args, "yzyyzIzI|p", &path, &host, &user, &pw, &db, &port, &sock, &timeout, &nonblock))
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
    SYM(s_field_count, "mysql_stmt_field_count"); SYM(s_bind_result, "mysql_stmt_bind_result");
    SYM(s_fetch, "mysql_stmt_fetch"); SYM(s_data_seek, "mysql_stmt_data_seek");
    *(void **)(&n->thread_id) = dlsym(n->dl, "mysql_thread_id");
    *(void **)(&n->my_socket) = dlsym(n->dl, "mysql_get_socket");
    *(void **)(&n->s_execute_start) = dlsym(n->dl, "mysql_stmt_execute_start");
    *(void **)(&n->s_execute_cont) = dlsym(n->dl, "mysql_stmt_execute_cont");
    *(void **)(&n->s_store_start) = dlsym(n->dl, "mysql_stmt_store_result_start");
    *(void **)(&n->s_store_cont) = dlsym(n->dl, "mysql_stmt_store_result_cont");
    *(void **)(&n->m_query_start) = dlsym(n->dl, "mysql_real_query_start");
    *(void **)(&n->m_query_cont) = dlsym(n->dl, "mysql_real_query_cont");
    *(void **)(&n->m_store_start) = dlsym(n->dl, "mysql_store_result_start");
    *(void **)(&n->m_store_cont) = dlsym(n->dl, "mysql_store_result_cont");
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
    if (nonblock) {
        if (!n->s_execute_start || n->m_options(m, MYSQL_OPT_NONBLOCK, NULL)) {
            n->m_close(m);
            free(n);
            return Py_BuildValue("(Osy)", Py_None, "library", "MYSQL_OPT_NONBLOCK is not supported");
        }
        n->nonblock = 1;
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

/* session_id(cap) -> the server's id of the connection (PostgreSQL backend PID, MySQL thread id); 0: unknown */
static PyObject *session_id(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    if (!PyArg_ParseTuple(args, "O", &cap))
        return NULL;
    native_t *n = get(cap);
    if (!n)
        return NULL;
    if (n->engine == ENGINE_PG && n->backend_pid && n->conn)
        return PyLong_FromLong(n->backend_pid(n->conn));
    if (n->engine == ENGINE_MY && n->thread_id && n->conn)
        return PyLong_FromUnsignedLong(n->thread_id(n->conn));
    return PyLong_FromLong(0);
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

/* MySQL: bind statement s's result columns as strings, for OP_COL / OP_SCOL (0, or -1 with an exception set).
 * Only for a program that reads results: a bound result costs every statement's store_result (measured: 4 µs
 * per point select). Wider results than MAX_COLS are counted, not read (OP_COL says so). */
static int my_bind_results(native_t *n, stmt_t *s) {
    unsigned int nc = s->has_rows && !s->rbind ? n->s_field_count(s->mst) : 0;
    if (!nc || nc > MAX_COLS)
        return 0;
    s->rbind = calloc(nc, sizeof *s->rbind);
    s->rbuf = malloc((size_t)nc * (MAX_STR + 1));
    s->rlen = calloc(nc, sizeof *s->rlen);
    s->rnull = calloc(nc, 1);
    s->rerr = calloc(nc, 1);
    if (!s->rbind || !s->rbuf || !s->rlen || !s->rnull || !s->rerr) {
        PyErr_NoMemory();
        return -1;
    }
    for (unsigned int c = 0; c < nc; c++) {
        my_bind_t *b = &s->rbind[c];
        b->buffer_type = MYSQL_TYPE_STRING; /* the connector converts every type to its text */
        b->buffer = s->rbuf + (size_t)c * (MAX_STR + 1);
        b->buffer_length = MAX_STR + 1;
        b->length = &s->rlen[c];
        b->is_null = &s->rnull[c];
        b->error = &s->rerr[c];
    }
    if (n->s_bind_result(s->mst, s->rbind)) {
        PyErr_Format(PyExc_ValueError, "native program: mysql_stmt_bind_result failed: %s", n->s_error(s->mst));
        return -1;
    }
    s->ncols = (int)nc;
    return 0;
}

/* Check the program as the loop will read it; -1 with ValueError set on the first problem. Linear pass: every
 * operand in range, the stack depth at each instruction (never under- or overflowing); then every jump
 * target is an instruction whose depth is 0, and a jump leaves from an empty stack: so any path reaches an
 * instruction with the depth the linear pass gave it. A statement's parameter is an integer at every site
 * or a string at every site (MySQL binds its buffer once). Long because it is one switch over the opcodes,
 * the same as Program.check in workloads/native/progcheck.py. */
static int verify(native_t *n, const int64_t *p, Py_ssize_t len) {
    int depth = 0, ret = -1;
    Py_ssize_t pc = 0;
    int *dep = malloc((size_t)(len + 1) * sizeof *dep);
    signed char cls[MAX_STMTS][MAX_PARAMS];
    if (!dep) {
        PyErr_NoMemory();
        return -1;
    }
    memset(cls, -1, sizeof cls);
    for (Py_ssize_t i = 0; i <= len; i++)
        dep[i] = -1;
#define BAD(msg)                                                            \
    do {                                                                    \
        PyErr_Format(PyExc_ValueError, "native program: %s at word %zd", msg, pc); \
        goto out;                                                           \
    } while (0)
#define ARGS(k) if (pc + (k) >= len) BAD("truncated")
#define VAR_OK(v) ((v) >= 0 && (v) < n->nvars)
#define REG_OK(r) ((r) >= 0 && (r) < MAX_SREGS)
    while (pc < len) {
        int64_t op = p[pc];
        dep[pc] = depth;
        switch (op) {
        case OP_CONST: ARGS(1); depth++; break;
        case OP_VAR: ARGS(1); if (!VAR_OK(p[pc + 1])) BAD("bad variable"); depth++; break;
        case OP_ROWS: depth++; break;
        case OP_SEQ:
            ARGS(2);
            if (!REG_OK(p[pc + 1]) || p[pc + 2] < 0 || p[pc + 2] >= n->npools) BAD("bad string comparison");
            depth++;
            break;
        case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_FDIV: case OP_MOD: case OP_RANDOM: case OP_LT:
        case OP_EQ: case OP_OR:
            if (depth < 2) BAD("stack underflow");
            depth--;
            break;
        case OP_NEG: case OP_ABS:
            if (depth < 1) BAD("stack underflow");
            break;
        case OP_COL:
            ARGS(2);
            if (depth < 1) BAD("stack underflow");
            if (p[pc + 1] < 0 || p[pc + 1] >= MAX_COLS || p[pc + 2] < 0 || p[pc + 2] > MAX_SCALE) BAD("bad column");
            break;
        case OP_VARX:
            ARGS(1);
            if (depth < 1) BAD("stack underflow");
            if (!VAR_OK(p[pc + 1])) BAD("bad variable");
            break;
        case OP_LEAST: case OP_GREATEST:
            ARGS(1);
            if (p[pc + 1] < 1 || p[pc + 1] > depth) BAD("bad argument count");
            depth -= (int)p[pc + 1] - 1;
            break;
        case OP_STORE: case OP_JZ:
            ARGS(1);
            if (op == OP_STORE && !VAR_OK(p[pc + 1])) BAD("bad variable");
            if (depth != 1) BAD("needs exactly one value");
            depth = 0;
            break;
        case OP_SCOL:
            ARGS(2);
            if (p[pc + 1] < 0 || p[pc + 1] >= MAX_COLS || !REG_OK(p[pc + 2])) BAD("bad column or register");
            if (depth != 1) BAD("needs exactly one value");
            depth = 0;
            break;
        case OP_SORT:
            ARGS(2);
            if (!VAR_OK(p[pc + 1]) || p[pc + 2] < 1 || p[pc + 2] > n->nvars) BAD("bad records");
            if (depth != 1) BAD("needs exactly one value");
            depth = 0;
            break;
        case OP_STOREX:
            ARGS(1);
            if (!VAR_OK(p[pc + 1])) BAD("bad variable");
            if (depth != 2) BAD("needs exactly two values");
            depth = 0;
            break;
        case OP_JMP: ARGS(1); if (depth) BAD("values left on the stack"); break;
        case OP_TALLY:
            ARGS(1);
            if (depth) BAD("values left on the stack");
            if (p[pc + 1] < 0 || p[pc + 1] >= MAX_TALLY) BAD("bad tally");
            break;
        case OP_EXEC: {
            if (depth) BAD("values left on the stack");
            ARGS(2);
            if (p[pc + 1] < 0 || p[pc + 1] >= n->nstmts) BAD("bad statement");
            int64_t np = p[pc + 2];
            if (np != n->st[p[pc + 1]].nparams || pc + 3 + 2 * np > len)
                BAD("bad parameter count");
            for (int64_t j = 0; j < np; j++) {
                int64_t kind = p[pc + 3 + 2 * j], var = p[pc + 4 + 2 * j];
                if (kind < P_SREG || kind > n->npools) BAD("bad parameter kind");
                if (kind == P_SREG ? !REG_OK(var) : !VAR_OK(var)) BAD("bad parameter variable");
                signed char *c = &cls[p[pc + 1]][j];
                if (*c >= 0 && *c != (kind != P_INT)) BAD("a parameter is an integer at one site, a string at another");
                *c = kind != P_INT;
            }
            break;
        }
        case OP_FMT: {
            if (depth) BAD("values left on the stack");
            ARGS(3);
            int64_t np = p[pc + 3];
            if (!REG_OK(p[pc + 1]) || p[pc + 2] < 0 || p[pc + 2] > MAX_STR || np < 0 || np > MAX_PARAMS ||
                pc + 4 + 2 * np > len)
                BAD("bad format");
            for (int64_t j = 0; j < np; j++) {
                int64_t kind = p[pc + 4 + 2 * j], v = p[pc + 5 + 2 * j];
                int ok = kind == F_INT || kind == F_CENTS ? VAR_OK(v) : kind == F_SREG ? REG_OK(v)
                         : kind == F_LIT ? v >= 0 && v < n->npools : 0;
                if (!ok) BAD("bad format part");
            }
            break;
        }
        case OP_SIMPLE:
            if (depth) BAD("values left on the stack");
            ARGS(1);
            if (p[pc + 1] < 0 || p[pc + 1] >= n->ntexts) BAD("bad text");
            break;
        default:
            BAD("unknown op");
        }
        if (depth > MAX_STACK) BAD("stack overflow");
        pc += op_width(p, pc, len);
    }
    if (depth) BAD("values left on the stack");
    dep[len] = 0;
    for (pc = 0; pc < len; pc += op_width(p, pc, len)) {
        if (p[pc] == OP_JMP || p[pc] == OP_JZ) {
            int64_t t = p[pc + 1];
            if (t < 0 || t > len || dep[t] != 0) BAD("a jump to a word that is not an instruction on an empty stack");
        }
    }
    ret = 0;
out:
    free(dep);
    return ret;
#undef BAD
#undef ARGS
#undef VAR_OK
#undef REG_OK
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
    n->slot_of = calloc((size_t)words, sizeof *n->slot_of);
    if (!n->slot_of) {
        PyErr_NoMemory();
        goto done;
    }
    /* a statement's latency slot is its place in the program text: with jumps, a transaction may send
     * one several times (order lines) or not at all */
    for (Py_ssize_t pc = 0; pc < n->nprog; pc += op_width(n->prog, pc, n->nprog)) {
        int64_t op = n->prog[pc];
        if (op == OP_EXEC || op == OP_SIMPLE)
            n->slot_of[pc] = n->nexec++;
    }
    n->shist = calloc((size_t)(n->nexec ? n->nexec : 1) * SH_BINS, sizeof *n->shist);
    n->sover = calloc(2 * SH_OVER, sizeof *n->sover);
    n->cap_over = SH_OVER;
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
                if (n->prog[pc + 3 + 2 * j] != P_INT) { /* a pool string, cents, a string register */
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
        }
        pc += op_width(n->prog, pc, n->nprog);
    }
    int reads = 0;
    for (Py_ssize_t pc = 0; pc < n->nprog; pc += op_width(n->prog, pc, n->nprog))
        reads |= n->prog[pc] == OP_COL || n->prog[pc] == OP_SCOL;
    for (int i = 0; n->engine == ENGINE_MY && reads && i < n->nstmts; i++)
        if (my_bind_results(n, &n->st[i]) < 0)
            goto done;
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

/* An integer as a decimal with two places (cents -> "12.34"); the length written. */
static int fmt_cents(char *buf, size_t size, int64_t v) {
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    return snprintf(buf, size, "%s%llu.%02llu", v < 0 ? "-" : "", (unsigned long long)(a / 100),
                    (unsigned long long)(a % 100));
}

/* Parameter j's text (PostgreSQL) or string buffer (MySQL) for a string kind: a pool's string, cents, a string
 * register. *len its length; the returned pointer lives until the next statement. */
static const char *param_text(native_t *n, int64_t kind, int64_t v, char *scratch, size_t size,
                              unsigned long *len) {
    if (kind == P_CENTS) {
        *len = (unsigned long)fmt_cents(scratch, size, v);
        return scratch;
    }
    if (kind == P_SREG) {
        *len = n->sreg_len[v];
        return n->sreg[v];
    }
    int k = n->pool_n[kind - 1];
    int idx = (int)(((v % k) + k) % k);
    *len = n->pool_len[kind - 1][idx];
    return n->pools[kind - 1][idx];
}

/* Run one prepared statement with the current variables; NULL on success, else the error tuple. Its time
 * (s->ns) is counted by the caller, which reads the clock once per statement. Its result is kept for the
 * program to read (drop_last frees the one before). */
/* PostgreSQL: a statement's np parameters (pp: kind, variable pairs) as texts in values (the numbers written
 * into ibuf); run_stmt and mx_send bind the same way. */
static void pg_params(native_t *n, int np, const int64_t *pp, const int64_t *vars, char ibuf[][24],
                      const char **values) {
    unsigned long len;
    for (int j = 0; j < np; j++) {
        int64_t kind = pp[2 * j], v = pp[2 * j + 1];
        if (kind == P_INT) {
            snprintf(ibuf[j], 24, "%lld", (long long)vars[v]);
            values[j] = ibuf[j];
        } else {
            values[j] = param_text(n, kind, kind == P_SREG ? v : vars[v], ibuf[j], 24, &len);
        }
    }
}

/* MySQL: statement s's parameters (pp: kind, variable pairs) into its bound buffers. */
static void my_params(native_t *n, stmt_t *s, const int64_t *pp, const int64_t *vars) {
    unsigned long len;
    for (int j = 0; j < s->nparams; j++) {
        int64_t kind = pp[2 * j], v = pp[2 * j + 1];
        if (kind == P_INT) {
            s->ints[j] = vars[v];
        } else {
            char scratch[32];
            const char *t = param_text(n, kind, kind == P_SREG ? v : vars[v], scratch, sizeof scratch, &len);
            memcpy(s->sbuf[j], t, len);
            s->lens[j] = len;
        }
    }
}

static PyObject *run_stmt(native_t *n, stmt_t *s, const int64_t *pp, const int64_t *vars) {
    int np = s->nparams;
    drop_last(n);
    if (n->engine == ENGINE_PG) {
        char ibuf[MAX_PARAMS][24];
        const char *values[MAX_PARAMS];
        pg_params(n, np, pp, vars, ibuf, values);
        void *res = n->exec_prepared(n->conn, s->name, np, values, NULL, NULL, 0);
        int st = res ? n->rstatus(res) : -1;
        if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
            PyObject *e = or_failed(pg_error(n, res));
            if (res)
                n->clear(res);
            return e;
        }
        n->last_rows = n->ntuples(res);
        s->rows += n->last_rows;
        n->last_res = res;
    } else {
        my_params(n, s, pp, vars);
        if (n->s_execute(s->mst))
            return or_failed(my_error(n, s->mst));
        n->last_rows = 0;
        if (s->has_rows) {
            if (n->s_store(s->mst)) {
                PyObject *e = or_failed(my_error(n, s->mst));
                n->s_free_result(s->mst);
                return e;
            }
            n->last_rows = (long long)n->s_num_rows(s->mst);
            s->rows += n->last_rows;
            n->last_st = s;
        }
    }
    n->has_last = 1;
    s->execs++;
    return NULL;
}

/* The text at (row, col) of the last result: 0 and *val (NULL for SQL NULL), *len; else -1 with *err set. */
static int cell(native_t *n, int64_t row, int64_t col, const char **val, unsigned long *len, PyObject **err) {
    const char *why = NULL;
    if (!n->has_last)
        why = "the program reads a result before any statement";
    else if (row < 0 || row >= n->last_rows)
        why = "the program reads a row past its result";
    if (!why && n->engine == ENGINE_PG) {
        if (!n->last_res || col >= n->nfields(n->last_res)) {
            why = "the program reads a column past its result";
        } else if (n->getisnull(n->last_res, (int)row, (int)col)) {
            *val = NULL;
        } else {
            *val = n->getvalue(n->last_res, (int)row, (int)col);
            *len = (unsigned long)n->getlength(n->last_res, (int)row, (int)col);
        }
    } else if (!why) {
        stmt_t *s = n->last_st;
        if (!s || col >= s->ncols) {
            why = "the program reads a column past its result";
        } else {
            if (n->fetched_row != row) {
                n->s_data_seek(s->mst, (unsigned long long)row);
                int rc = n->s_fetch(s->mst);
                n->fetched_row = rc == 0 || rc == 101 ? row : -1; /* 101: MYSQL_DATA_TRUNCATED, told below */
                if (n->fetched_row < 0)
                    why = "fetching a result row failed";
            }
            if (!why && s->rnull[col]) {
                *val = NULL;
            } else if (!why) {
                *val = s->rbuf + (size_t)col * (MAX_STR + 1);
                *len = s->rlen[col];
            }
        }
    }
    if (!why && *val && *len > MAX_STR)
        why = "a result value is longer than 1024 bytes";
    if (why) {
        *err = script_error(why);
        return -1;
    }
    return 0;
}

/* A result's text as an integer times 10^scale ("12.345", 2 -> 1234: truncated); NULL -> 0. As
 * workloads/native/progref.py's parse_scaled: [+-]digits[.digits], at most MAX_DIGITS digits with the scale. */
static int parse_scaled(const char *v, unsigned long len, int scale, int64_t *out) {
    if (!v) {
        *out = 0;
        return 0;
    }
    unsigned long i = 0;
    int neg = 0, sig = 0, any = 0, f = 0;
    int64_t x = 0;
    if (i < len && (v[i] == '-' || v[i] == '+'))
        neg = v[i++] == '-';
#define DIGIT(c)                                  \
    do {                                          \
        x = x * 10 + ((c) - '0');                 \
        if (x && ++sig > MAX_DIGITS)              \
            return -1;                            \
    } while (0)
    for (; i < len && v[i] >= '0' && v[i] <= '9'; i++, any = 1)
        DIGIT(v[i]);
    if (i < len && v[i] == '.') {
        for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++, any = 1) {
            if (f < scale) {
                DIGIT(v[i]);
                f++;
            }
        }
    }
    if (i != len || !any)
        return -1;
    for (; f < scale; f++)
        DIGIT('0');
#undef DIGIT
    *out = neg ? -x : x;
    return 0;
}

/* OP_FMT: string register reg = the parts, cut at max bytes (not inside a UTF-8 character). */
static void run_fmt(native_t *n, const int64_t *w, const int64_t *vars) {
    char buf[MAX_STR + 1];
    size_t used = 0, max = (size_t)w[1];
    int64_t np = w[2];
    for (int64_t j = 0; j < np && used < max; j++) {
        int64_t kind = w[3 + 2 * j], v = w[4 + 2 * j];
        char num[32];
        const char *t;
        size_t l;
        if (kind == F_INT) {
            l = (size_t)snprintf(num, sizeof num, "%lld", (long long)vars[v]);
            t = num;
        } else if (kind == F_CENTS) {
            l = (size_t)fmt_cents(num, sizeof num, vars[v]);
            t = num;
        } else if (kind == F_SREG) {
            t = n->sreg[v];
            l = n->sreg_len[v];
        } else {
            t = n->pools[v][0];
            l = n->pool_len[v][0];
        }
        if (l > max - used) { /* cut, not inside a UTF-8 character (the Python side's decode(errors="ignore")) */
            l = max - used;
            while (l > 0 && ((unsigned char)t[l] & 0xC0) == 0x80)
                l--;
            max = used + l; /* nothing after a cut */
        }
        memcpy(buf + used, t, l);
        used += l;
    }
    int64_t reg = w[0];
    memcpy(n->sreg[reg], buf, used);
    n->sreg[reg][used] = 0;
    n->sreg_len[reg] = (unsigned long)used;
}

/* One statement's latency into its slot's counts (keep: the batch keeps statement latencies). */
static inline void count_latency(native_t *n, int slot, int64_t ns) {
    int64_t us = ns / 1000;
    if (us < SH_BINS) {
        n->shist[(size_t)slot * SH_BINS + (us > 0 ? us : 0)]++;
    } else {
        /* The batch loop stops before nover + nexec passes SH_OVER, which bounds a transaction whose
         * statements run once each; a program's loop can run one statement many times (up to MAX_JUMPS),
         * so the pairs grow here instead of being written past the end. */
        if (n->nover >= n->cap_over) {
            int cap = n->cap_over * 2;
            int64_t *p = realloc(n->sover, 2 * (size_t)cap * sizeof *p);
            if (!p) { /* out of memory: count it in the slot's last bin rather than lose the statement */
                n->shist[(size_t)slot * SH_BINS + SH_BINS - 1]++;
                return;
            }
            n->sover = p;
            n->cap_over = cap;
        }
        n->sover[2 * n->nover] = slot;
        n->sover[2 * n->nover + 1] = us;
        n->nover++;
    }
}

/* After a failed statement: leave no transaction open (the next transaction starts clean, as the
 * Python loop's after_error does). Errors here are ignored: the statement's error is the one reported,
 * and a lost connection shows in it. */
static void rollback(native_t *n) {
    drop_last(n);
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


/* interp's answer when it sent a statement without waiting for it (mx): the transaction waits at x->pc */
static PyObject sent_obj;
#define SENT (&sent_obj)

static PyObject *mx_send(native_t *n, const int64_t *w, const int64_t *vars);

/* After statement pc completed: its latency (one clock read), the transaction's statement count, the next pc. */
static inline void stmt_done(native_t *n, txn_t *x, Py_ssize_t pc, int keep) {
    int64_t te = now_ns();
    const int64_t *p = n->prog;
    if (p[pc] == OP_EXEC)
        n->st[p[pc + 1]].ns += te - x->ts;
    if (keep)
        count_latency(n, n->slot_of[pc], te - x->ts);
    x->sent++;
    x->ts = te;
    x->pc = pc + op_width(p, pc, n->nprog);
}

/* Run the program from x->pc. NULL: it ran to its end (the statements and tallies counted); SENT (async only):
 * a statement was sent and the transaction waits at x->pc for its result (stmt_done then resumes it); else
 * the error tuple. Synchronously each statement runs in place, timed from the end of the one before (the
 * first from x->ts): one clock read per statement; keep: count them (count_latency). */
static PyObject *interp(native_t *n, txn_t *x, uint64_t *state, int64_t *vars, long long *simple_rows, int keep,
                        int async) {
    int64_t stack[MAX_STACK + 1];
    int sp = 0;
    const int64_t *p = n->prog;
    Py_ssize_t pc = x->pc, len = n->nprog;
    long long *tally = x->tally;
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
        case OP_EXEC: case OP_SIMPLE: {
            PyObject *e;
            if (async) {
                x->pc = pc;
                e = mx_send(n, p + pc, vars);
                return e ? e : SENT;
            }
            if (p[pc] == OP_EXEC) {
                e = run_stmt(n, &n->st[p[pc + 1]], p + pc + 3, vars);
            } else {
                void *m = n->tst[p[pc + 1]];
                e = m ? my_simple_prepared(n, m) : simple(n, n->texts[p[pc + 1]], simple_rows);
            }
            if (e)
                return e;
            stmt_done(n, x, pc, keep);
            pc = x->pc;
            break;
        }
        case OP_JMP: case OP_JZ:
            if (p[pc] == OP_JZ && stack[--sp] != 0) {
                pc += 2;
                break;
            }
            if (++x->jumps > MAX_JUMPS)
                return script_error("the program took more than 100000 jumps in one transaction");
            pc = p[pc + 1];
            break;
        case OP_LT: sp--; stack[sp - 1] = stack[sp - 1] < stack[sp]; pc++; break;
        case OP_EQ: sp--; stack[sp - 1] = stack[sp - 1] == stack[sp]; pc++; break;
        case OP_OR: sp--; stack[sp - 1] |= stack[sp]; pc++; break;
        case OP_ROWS: stack[sp++] = n->has_last ? n->last_rows : 0; pc++; break;
        case OP_COL: case OP_SCOL: {
            const char *v = NULL;
            unsigned long l = 0;
            PyObject *e = NULL;
            if (cell(n, stack[sp - 1], p[pc + 1], &v, &l, &e) < 0)
                return e;
            if (p[pc] == OP_COL) {
                if (parse_scaled(v, l, (int)p[pc + 2], &stack[sp - 1]) < 0)
                    return script_error("a result value the program reads as a number is not one");
            } else {
                int64_t r = p[pc + 2];
                sp--;
                if (v)
                    memcpy(n->sreg[r], v, l);
                n->sreg[r][v ? l : 0] = 0;
                n->sreg_len[r] = v ? l : 0;
            }
            pc += 3;
            break;
        }
        case OP_VARX: case OP_STOREX: {
            int64_t i = p[pc] == OP_VARX ? stack[sp - 1] : stack[sp - 2], at = p[pc + 1];
            if (i < 0 || i >= n->nvars - at)
                return script_error("the program indexes a variable past the last one");
            at += i;
            if (p[pc] == OP_VARX) {
                stack[sp - 1] = vars[at];
            } else {
                vars[at] = stack[sp - 1];
                sp -= 2;
            }
            pc += 2;
            break;
        }
        case OP_SORT: {
            int64_t k = stack[--sp], base = p[pc + 1], w = p[pc + 2];
            if (k < 0 || k > (n->nvars - base) / w)
                return script_error("the program sorts records past the last variable");
            int64_t *r = vars + base, tmp[MAX_VARS];
            for (int64_t i = 1; i < k; i++) { /* insertion sort of k records of w words, lexicographic */
                memcpy(tmp, r + i * w, (size_t)w * sizeof *tmp);
                int64_t j = i;
                for (; j > 0; j--) {
                    int64_t *prev = r + (j - 1) * w, c = 0;
                    for (int64_t q = 0; q < w && !c; q++)
                        c = prev[q] < tmp[q] ? -1 : prev[q] > tmp[q];
                    if (c <= 0)
                        break;
                    memcpy(r + j * w, prev, (size_t)w * sizeof *tmp);
                }
                memcpy(r + j * w, tmp, (size_t)w * sizeof *tmp);
            }
            pc += 3;
            break;
        }
        case OP_SEQ: {
            int64_t r = p[pc + 1], q = p[pc + 2];
            stack[sp++] = n->sreg_len[r] == n->pool_len[q][0] && !memcmp(n->sreg[r], n->pools[q][0], n->sreg_len[r]);
            pc += 3;
            break;
        }
        case OP_FMT: run_fmt(n, p + pc + 1, vars); pc += 4 + 2 * p[pc + 3]; break;
        case OP_TALLY: tally[p[pc + 1]]++; pc += 2; break;
        default: /* verified at load: not reached */
            return script_error("native program: unknown op");
        }
    }
    /* counted only for a transaction that ran to its end (a failed one is retried, or counted as an error) */
    x->pc = pc;
    n->sent += x->sent;
    for (int k = 0; k < MAX_TALLY; k++)
        n->tally[k] += tally[k];
    return NULL;
}

/* One transaction, synchronously: the whole program, from *t (the previous transaction's end, ns); *t is then
 * when its last statement ended. NULL on success, else the error tuple. */
static PyObject *run_once(native_t *n, uint64_t *state, int64_t *vars, long long *simple_rows, int64_t *t,
                          int keep) {
    txn_t x;
    memset(&x, 0, sizeof x);
    x.ts = *t;
    drop_last(n); /* a program reads only its own transaction's results */
    PyObject *e = interp(n, &x, state, vars, simple_rows, keep, 0);
    *t = x.ts;
    return e;
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

/* d[key] = n (both as Python ints): 0, or -1 with a Python error set. */
static int set_count(PyObject *d, long long key, unsigned long long n) {
    PyObject *k = PyLong_FromLongLong(key), *v = PyLong_FromUnsignedLongLong(n);
    int bad = !k || !v || PyDict_SetItem(d, k, v) < 0;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return bad ? -1 : 0;
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
        for (int us = 0; us < SH_BINS; us++)
            if (h[us] && set_count(d, us, h[us]) < 0)
                goto fail;
    }
    for (int i = 0; i < n->nover; i++) {
        PyObject *d = PyTuple_GET_ITEM(t, (Py_ssize_t)n->sover[2 * i]);
        int64_t us = n->sover[2 * i + 1];
        if (us >= 2048) { /* one key per bucket of the parent's histograms, as workloads.hist.bucket */
            int sh = 64 - __builtin_clzll((unsigned long long)us) - 11;
            us = us >> sh << sh;
        }
        PyObject *k = PyLong_FromLongLong(us);
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

/* counts(cap) -> (statements, (tally 0, ..., tally MAX_TALLY-1)) of the transactions run to their end since the
 * last call; emptied. The statement count of a program with jumps differs between transactions. */
static PyObject *counts(PyObject *self, PyObject *args) {
    (void)self;
    native_t *n = get_arg(args);
    if (!n)
        return NULL;
    PyObject *t = PyTuple_New(MAX_TALLY);
    if (!t)
        return NULL;
    for (int k = 0; k < MAX_TALLY; k++) {
        PyObject *v = PyLong_FromLongLong(n->tally[k]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, k, v);
    }
    PyObject *r = Py_BuildValue("(LN)", n->sent, t);
    if (r) {
        n->sent = 0;
        memset(n->tally, 0, sizeof n->tally);
    }
    return r;
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

/* ---- Many connections per process (issue 26) ----
 *
 * mx_run keeps a transaction in flight on each of a group's connections, as pgbench -j does: the program runs
 * (interp, async) until it reaches a statement, which is sent without waiting (PQsendQueryPrepared;
 * mysql_stmt_execute_start on a MYSQL_OPT_NONBLOCK connection); epoll says which connections have an answer,
 * and each is taken in (PQconsumeInput / PQisBusy / PQgetResult; the libmariadb _cont calls) and its program
 * resumed. A transaction's latency runs from the previous one's end on the same connection, as in run(); its
 * statements are timed and counted the same way (stmt_done). */
enum { MX_IDLE = 0, MX_PG_EXEC, MX_PG_SIMPLE, MX_MY_EXEC, MX_MY_STORE, MX_MY_QUERY, MX_MY_QSTORE };

/* Whether this connection's library has the non-blocking calls mx_run needs. */
static int mx_capable(native_t *n) {
    if (n->engine == ENGINE_PG)
        return n->pq_socket && n->pq_send_prepared && n->pq_send_query && n->pq_consume && n->pq_busy &&
               n->pq_get_result;
    return n->nonblock && n->my_socket && n->s_execute_start && n->s_execute_cont && n->s_store_start &&
           n->s_store_cont && n->m_query_start && n->m_query_cont && n->m_store_start && n->m_store_cont;
}

static int mx_fd(native_t *n) { return n->engine == ENGINE_PG ? n->pq_socket(n->conn) : n->my_socket(n->conn); }

/* MySQL: the statement in flight after a _start/_cont call returned status st (ret, res: what it gave back).
 * 1: complete (its result read, as run_stmt / my_simple_prepared / simple leave it), 0: it waits for the
 * events in st (n->mx_wait), -1: failed (*err). */
static int my_next(native_t *n, int st, int ret, void *res, PyObject **err) {
    for (;;) {
        if (st) {
            n->mx_wait = st;
            return 0;
        }
        void *m = n->mx_m;
        stmt_t *s = n->mx_st;
        switch (n->mx_phase) {
        case MX_MY_EXEC:
            if (ret) {
                *err = or_failed(my_error(n, m));
                return -1;
            }
            if (s ? !s->has_rows : !n->s_field_count(m)) {
                if (s) {
                    n->last_rows = 0;
                    n->has_last = 1;
                    s->execs++;
                }
                return 1;
            }
            n->mx_phase = MX_MY_STORE;
            ret = 0;
            st = n->s_store_start(&ret, m);
            continue;
        case MX_MY_STORE:
            if (ret) {
                *err = or_failed(my_error(n, m));
                n->s_free_result(m);
                return -1;
            }
            if (s) {
                n->last_rows = (long long)n->s_num_rows(m);
                s->rows += n->last_rows;
                n->last_st = s;
                n->has_last = 1;
                s->execs++;
            } else {
                n->s_free_result(m);
            }
            return 1;
        case MX_MY_QUERY:
            if (ret) {
                *err = or_failed(my_error(n, NULL));
                return -1;
            }
            n->mx_phase = MX_MY_QSTORE;
            res = NULL;
            st = n->m_store_start(&res, n->conn);
            continue;
        case MX_MY_QSTORE:
            if (res) {
                n->m_free(res);
            } else if (n->m_field_count(n->conn)) {
                *err = or_failed(my_error(n, NULL));
                return -1;
            }
            return 1;
        default:
            *err = script_error("native: no statement in flight");
            return -1;
        }
    }
}

/* PostgreSQL: take in what arrived for the statement in flight; as my_next. */
static int pg_next(native_t *n, PyObject **err) {
    if (!n->pq_consume(n->conn)) {
        *err = or_failed(pg_error(n, NULL));
        return -1;
    }
    for (;;) {
        if (n->pq_busy(n->conn))
            return 0;
        void *r = n->pq_get_result(n->conn);
        if (!r)
            break;
        if (!n->mx_res)
            n->mx_res = r;
        else
            n->clear(r);
    }
    void *res = n->mx_res;
    n->mx_res = NULL;
    int st = res ? n->rstatus(res) : -1;
    int exec = n->mx_phase == MX_PG_EXEC;
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK && (exec || st != PGRES_EMPTY_QUERY)) {
        *err = or_failed(pg_error(n, res));
        if (res)
            n->clear(res);
        return -1;
    }
    if (exec) {
        n->last_rows = n->ntuples(res);
        n->mx_st->rows += n->last_rows;
        n->last_res = res;
        n->has_last = 1;
        n->mx_st->execs++;
    } else {
        n->clear(res);
    }
    return 1;
}

/* Send the statement at w (OP_EXEC or OP_SIMPLE) without waiting: NULL (sent, or already answered: mx_phase
 * says which) or the error tuple. */
static PyObject *mx_send(native_t *n, const int64_t *w, const int64_t *vars) {
    n->mx_st = NULL;
    n->mx_m = NULL;
    if (w[0] == OP_EXEC) {
        stmt_t *s = &n->st[w[1]];
        const int64_t *pp = w + 3;
        int np = s->nparams;
        drop_last(n);
        n->mx_st = s;
        if (n->engine == ENGINE_PG) {
            char ibuf[MAX_PARAMS][24];
            const char *values[MAX_PARAMS];
            pg_params(n, np, pp, vars, ibuf, values);
            n->mx_phase = MX_PG_EXEC;
            if (!n->pq_send_prepared(n->conn, s->name, np, values, NULL, NULL, 0))
                return or_failed(pg_error(n, NULL));
            return NULL;
        }
        my_params(n, s, pp, vars);
        n->mx_m = s->mst;
    } else if (n->engine == ENGINE_PG) {
        n->mx_phase = MX_PG_SIMPLE;
        if (!n->pq_send_query(n->conn, n->texts[w[1]]))
            return or_failed(pg_error(n, NULL));
        return NULL;
    } else {
        n->mx_m = n->tst[w[1]];
    }
    int ret = 0;
    PyObject *e = NULL;
    int st;
    n->mx_wait = 0;
    if (n->mx_m) {
        n->mx_phase = MX_MY_EXEC;
        st = n->s_execute_start(&ret, n->mx_m);
    } else {
        const char *sql = n->texts[w[1]];
        n->mx_phase = MX_MY_QUERY;
        st = n->m_query_start(&ret, n->conn, sql, (unsigned long)strlen(sql));
    }
    if (my_next(n, st, ret, NULL, &e) < 0)
        return e;
    return NULL; /* answered at once (my_next returned 1) is told by mx_wait == 0 */
}

/* The statement in flight, after epoll reported events ev on its socket: 1 complete, 0 waiting, -1 *err. */
static int mx_progress(native_t *n, uint32_t ev, PyObject **err) {
    if (n->engine == ENGINE_PG)
        return pg_next(n, err);
    int st = (ev & (EPOLLIN | EPOLLHUP | EPOLLERR) ? MYSQL_WAIT_READ : 0) | (ev & EPOLLOUT ? MYSQL_WAIT_WRITE : 0) |
             (ev & EPOLLPRI ? MYSQL_WAIT_EXCEPT : 0);
    int ret = 0;
    void *res = NULL;
    switch (n->mx_phase) {
    case MX_MY_EXEC: st = n->s_execute_cont(&ret, n->mx_m, st); break;
    case MX_MY_STORE: st = n->s_store_cont(&ret, n->mx_m, st); break;
    case MX_MY_QUERY: st = n->m_query_cont(&ret, n->conn, st); break;
    case MX_MY_QSTORE: st = n->m_store_cont(&res, n->conn, st); break;
    default: return 0;
    }
    return my_next(n, st, ret, res, err);
}

/* The epoll events a connection waits for now. */
static uint32_t mx_events(native_t *n) {
    if (n->engine == ENGINE_PG)
        return EPOLLIN;
    return (n->mx_wait & MYSQL_WAIT_READ ? EPOLLIN : 0) | (n->mx_wait & MYSQL_WAIT_WRITE ? EPOLLOUT : 0) |
           (n->mx_wait & MYSQL_WAIT_EXCEPT ? EPOLLPRI : 0);
}

#define MXCAP "dbdiag.mxgroup"
typedef struct {
    int ep;            /* the epoll instance */
    int n;             /* connections */
    native_t **conn;   /* as last seen by mx_run (a reconnect puts another in a slot) */
    int *fd;           /* the fd registered per slot (-1: none) */
    uint32_t *events;  /* the events registered per slot */
    long long waits;   /* epoll_wait calls so far (mx_stats) */
    long long ctls;    /* epoll_ctl calls so far (mx_stats) */
    long long early;   /* statements whose answer was in when looked at right after sending (mx_stats) */
    /* A folding group (mx_group(n, True)) counts each ended transaction here instead of handing its pair to
     * Python: per slot, and the group's latencies in one histogram of the parent's buckets (mx_take). At 200
     * PostgreSQL clients the pairs turned into Python lists, folded per client and merged per client by the
     * orchestrator cost the clients and the orchestrator about 40% of what pgbench's client spends per
     * transaction, and the server ran slower beside them (issue 26; BENCHMARKS.md, "Fourth time"). */
    int fold;
    /* PostgreSQL: after sending a statement, look for its answer at once, and run the connection's next
     * transactions while their answers are already in, up to this many in a row (0: wait for epoll). On this
     * 2-vCPU machine the backend woken by the send usually runs on the sender's CPU and has answered by the time
     * the sender runs again; going back to epoll_wait first left that answer to cool while the process served
     * other connections, and the scheduler placed 44% of the backends' wake-ups on the other CPU (20% under
     * pgbench): at 200 clients the server then spent 28 µs per transaction against 22 under pgbench. pgbench
     * does the same in its state machine (pgbench.c, advanceConnectionState, CSTATE_WAIT_RESULT: it calls
     * PQconsumeInput right after sending, measured here as 1.43 recv per transaction). The bound keeps one
     * connection from holding the others back for more than about a millisecond. BENCHMARKS.md, issue 26. */
    int eager;
    int64_t *cnt;      /* transactions per slot since mx_take */
    uint32_t *hist;    /* MX_HB buckets: latencies since mx_take */
} mxgroup_t;

/* The histogram buckets of a folding group: workloads.hist.bucket's, exact below 2,048 µs, then 1,024 per
 * doubling up to 2,047 << 21 µs (71 minutes; longer ones count in the last bucket: the parent clamps at an
 * hour anyway). */
#define MX_HB (2048 + 21 * 1024)

/* The bucket of a latency of ns nanoseconds (0 µs counts as 1, as workloads.hist.fold). */
static inline int mx_bucket(int64_t ns) {
    int64_t us = ns / 1000;
    if (us < 1)
        return 1;
    if (us < 2048)
        return (int)us;
    int sh = 64 - __builtin_clzll((unsigned long long)us) - 11;
    int64_t b = 2048 + (int64_t)(sh - 1) * 1024 + ((us >> sh) - 1024);
    return b < MX_HB ? (int)b : MX_HB - 1;
}

/* The lowest µs of bucket b (mx_bucket's inverse). */
static inline long long mx_bucket_us(int b) {
    if (b < 2048)
        return b;
    int sh = (b - 2048) / 1024 + 1;
    return (long long)((b - 2048) % 1024 + 1024) << sh;
}

/* epoll_ctl on the group's set, counted. */
static int mx_ctl(mxgroup_t *g, int op, int fd, struct epoll_event *e) {
    g->ctls++;
    return epoll_ctl(g->ep, op, fd, e);
}

/* Take slot i's fd out of the set (a closed fd left it by itself: the error is ignored). */
static void mx_unwatch(mxgroup_t *g, int i) {
    if (g->fd[i] >= 0)
        mx_ctl(g, EPOLL_CTL_DEL, g->fd[i], NULL);
    g->fd[i] = -1;
    g->events[i] = 0;
}

static void mx_free(mxgroup_t *g) {
    if (g->ep >= 0)
        close(g->ep);
    free(g->cnt);
    free(g->hist);
    free(g->conn);
    free(g->fd);
    free(g->events);
    free(g);
}

static void mx_destroy(PyObject *cap) {
    mxgroup_t *g = PyCapsule_GetPointer(cap, MXCAP);
    if (g)
        mx_free(g);
}

/* mx_group(n[, fold[, eager]]) -> a group capsule for n connection slots (the caps are given to each mx_run);
 * fold: the group counts its transactions itself (mx_take) and mx_run writes no pairs; eager: PostgreSQL
 * transactions a connection may run back to back while their answers are in at once (mxgroup_t.eager) */
static PyObject *mx_group(PyObject *self, PyObject *args) {
    (void)self;
    int k, fold = 0, eager = 0;
    if (!PyArg_ParseTuple(args, "i|pi", &k, &fold, &eager))
        return NULL;
    if (k < 1 || k > 1000000 || eager < 0) {
        PyErr_SetString(PyExc_ValueError, "mx_group: bad size");
        return NULL;
    }
    mxgroup_t *g = calloc(1, sizeof *g);
    if (!g)
        return PyErr_NoMemory();
    g->n = k;
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->conn = calloc(k, sizeof *g->conn);
    g->fd = malloc(k * sizeof *g->fd);
    g->events = calloc(k, sizeof *g->events);
    g->fold = fold;
    g->eager = eager;
    if (fold) {
        g->cnt = calloc(k, sizeof *g->cnt);
        g->hist = calloc(MX_HB, sizeof *g->hist);
    }
    if (g->ep < 0 || !g->conn || !g->fd || !g->events || (fold && (!g->cnt || !g->hist))) {
        int e = errno;
        mx_free(g);
        errno = e ? e : ENOMEM;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    for (int i = 0; i < k; i++)
        g->fd[i] = -1;
    PyObject *cap = PyCapsule_New(g, MXCAP, mx_destroy);
    if (!cap)
        mx_free(g);
    return cap;
}

/* mx_take(group) -> (transactions per slot since the last take, as int64 bytes; {µs: count} of their latencies,
 * one key per bucket of workloads.hist) of a folding group; both are emptied. */
static PyObject *mx_take(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *gcap;
    if (!PyArg_ParseTuple(args, "O", &gcap))
        return NULL;
    mxgroup_t *g = PyCapsule_GetPointer(gcap, MXCAP);
    if (!g)
        return NULL;
    if (!g->fold) {
        PyErr_SetString(PyExc_ValueError, "mx_take: not a folding group");
        return NULL;
    }
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    for (int b = 0; b < MX_HB; b++)
        if (g->hist[b] && set_count(d, mx_bucket_us(b), g->hist[b]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    PyObject *r = Py_BuildValue("(y#N)", (const char *)g->cnt, (Py_ssize_t)(g->n * sizeof *g->cnt), d);
    if (r) {
        memset(g->cnt, 0, g->n * sizeof *g->cnt);
        memset(g->hist, 0, MX_HB * sizeof *g->hist);
    }
    return r;
}

/* mx_stats(group) -> (epoll_wait calls, epoll_ctl calls, answers found right after sending) of the group so far */
static PyObject *mx_stats(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *gcap;
    if (!PyArg_ParseTuple(args, "O", &gcap))
        return NULL;
    mxgroup_t *g = PyCapsule_GetPointer(gcap, MXCAP);
    return g ? Py_BuildValue("(LLL)", g->waits, g->ctls, g->early) : NULL;
}

/* mx_init(cap, state) -> bool: ready this connection for mx_run (its generator from state, 8 bytes; no
 * transaction started); False when its library cannot be multiplexed. */
static PyObject *mx_init(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    Py_buffer st;
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &st))
        return NULL;
    native_t *n = get(cap);
    PyObject *r = NULL;
    if (n && (st.len < 8 || !n->prog || !n->nexec)) {
        PyErr_SetString(PyExc_ValueError, "mx_init: bad state, or no program with statements loaded");
    } else if (n) {
        memcpy(&n->mx_rng, st.buf, 8);
        n->mx_phase = MX_IDLE;
        n->mx_t0 = 0;
        n->mx_fresh = 1;
        memset(n->mx_vars, 0, sizeof n->mx_vars);
        r = PyBool_FromLong(mx_capable(n));
    }
    PyBuffer_Release(&st);
    return r;
}

/* Register slot i's connection for the events it waits for now. An idle connection keeps its registration:
 * the slots that idle because a call reached its deadline send again at the start of the next call, and a
 * delete then an add per connection per call was 0.2-0.3 epoll_ctl per transaction at 200 clients (an idle
 * socket that reports something anyway is taken out where mx_run reads it). 0 or -1 (errno). */
static int mx_watch(mxgroup_t *g, int i, native_t *n) {
    int fd = n && n->conn ? mx_fd(n) : -1;
    uint32_t ev = fd < 0 ? 0 : n->mx_phase != MX_IDLE ? mx_events(n) : fd == g->fd[i] ? g->events[i] : 0;
    if (g->fd[i] == fd && g->events[i] == ev)
        return 0;
    if (g->fd[i] >= 0 && (fd != g->fd[i] || !ev))
        mx_unwatch(g, i);
    if (fd < 0 || !ev)
        return 0;
    struct epoll_event e = {.events = ev, .data.u32 = (uint32_t)i};
    if (mx_ctl(g, g->fd[i] >= 0 ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &e) < 0)
        return -1;
    g->fd[i] = fd;
    g->events[i] = ev;
    return 0;
}


/* Run connection n's transaction on from where it is: 1 a statement waits for the server, 0 the transaction
 * ended (interp counted its statements and tallies; it ended at n->mx_x.ts), -1 it failed (*err). */
static int mx_resume(native_t *n, int keep, PyObject **err) {
    long long rows = 0;
    for (;;) {
        PyObject *e = interp(n, &n->mx_x, &n->mx_rng, n->mx_vars, &rows, keep, 1);
        if (e == NULL) {
            n->mx_phase = MX_IDLE;
            return 0;
        }
        if (e != SENT) {
            *err = e;
            return -1;
        }
        if (n->engine == ENGINE_MY && n->mx_wait == 0) { /* answered within the _start call */
            n->mx_phase = MX_IDLE;
            stmt_done(n, &n->mx_x, n->mx_x.pc, keep);
            continue;
        }
        return 1;
    }
}

/* A new transaction on n from t0: as mx_resume. */
static int mx_begin(native_t *n, int64_t t0, int keep, PyObject **err) {
    memset(&n->mx_x, 0, sizeof n->mx_x);
    n->mx_x.ts = t0;
    n->mx_t0 = t0;
    drop_last(n); /* a program reads only its own transaction's results */
    return mx_resume(n, keep, err);
}

/* After a failed transaction on slot i: roll it back (the connection idle again), add (i, its start ns, error)
 * to errors and take the slot out until the caller puts it back in (on[i]). -1 when a Python error is set. */
static int mx_fail(native_t *n, int i, PyObject *e, PyObject *errors, char *on) {
    n->mx_phase = MX_IDLE;
    if (n->mx_res) {
        n->clear(n->mx_res);
        n->mx_res = NULL;
    }
    on[i] = 0;
    int64_t t0 = n->mx_t0;
    n->mx_t0 = 0;
    if (e == FAILED)
        return -1;
    rollback(n);
    PyObject *t = Py_BuildValue("(iLN)", i, (long long)t0, e);
    if (!t || PyList_Append(errors, t) < 0) {
        Py_XDECREF(t);
        return -1;
    }
    Py_DECREF(t);
    return 0;
}

/* Slot i's transaction ended (at n->mx_x.ts): its pair into out (a folding group: counted in g); then the next
 * ones begin, from its end, while the slot is on, the clock is before until and out has room. As mx_begin: 1,
 * -1 (*err), 0 the slot idles. */
static int mx_ended(mxgroup_t *g, native_t *n, int i, const char *on, int64_t until, int64_t *out, Py_ssize_t *np,
                    Py_ssize_t room, int k, int keep, PyObject **err) {
    for (int guard = 0;; guard++) {
        int64_t t1 = n->mx_x.ts;
        if (g->fold) {
            g->cnt[i]++;
            g->hist[mx_bucket(t1 - n->mx_t0)]++;
        } else {
            out[2 * *np] = i;
            out[2 * *np + 1] = t1 - n->mx_t0;
        }
        (*np)++;
        n->mx_t0 = t1;
        /* guard: a program whose branches skip every statement would not wait for anything */
        if (!on[i] || t1 >= until || *np + k >= room || guard >= 1000)
            return 0;
        int r = mx_begin(n, t1, keep, err);
        if (r != 0)
            return r;
    }
}

/* mx_run(group, caps, on, until_ns, out, busy[, keep]) -> (pairs, errors)
 * Closed loop on every connection i of caps (a tuple of native capsules, each mx_init'ed) whose on[i] is
 * set: each transaction that ends writes the pair (i, latency ns from the connection's previous transaction's
 * end, or from its start when it is the first since mx_init or an error) into out (int64 pairs; a folding
 * group counts it in the group instead, for mx_take, and pairs is the number of transactions ended). No new
 * transaction starts at or after until_ns (or when out could not take one per connection more); a transaction
 * in flight then stays in flight, for the next call to take in. Returns when the clock reaches until_ns, out is
 * nearly full, or a transaction failed: errors, a list of (i, start ns, (code, message, lost)), each already
 * rolled back and its on[i] cleared. busy[i]: when the statement in flight on i started (ns), 0: none.
 * keep: count statement latencies for drain(). */
static PyObject *mx_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *gcap, *caps, *ret = NULL, *errors = NULL;
    Py_buffer onb, outb, busyb;
    long long until;
    int keep = 1;
    if (!PyArg_ParseTuple(args, "OO!w*Lw*w*|p", &gcap, &PyTuple_Type, &caps, &onb, &until, &outb, &busyb, &keep))
        return NULL;
    mxgroup_t *g = PyCapsule_GetPointer(gcap, MXCAP);
    int k = (int)PyTuple_GET_SIZE(caps);
    native_t **cn = NULL;
    if (!g)
        goto done;
    if (k != g->n || onb.len < k || busyb.len < (Py_ssize_t)(k * sizeof(int64_t)) ||
        outb.len < (Py_ssize_t)(2 * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "mx_run: bad arguments");
        goto done;
    }
    cn = malloc(k * sizeof *cn);
    errors = PyList_New(0);
    if (!cn || !errors) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < k; i++) {
        native_t *n = PyCapsule_GetPointer(PyTuple_GET_ITEM(caps, i), CAPSULE);
        if (!n)
            goto done;
        cn[i] = n->conn && n->prog && n->nexec ? n : NULL;
        if (g->conn[i] != cn[i] || (cn[i] && cn[i]->mx_fresh)) {
            if (cn[i])
                cn[i]->mx_fresh = 0; /* another connection in this slot (a reconnect): the old fd is let go */
            mx_unwatch(g, i); /* here, before any slot registers (a new connection may have the old fd's number) */
            g->conn[i] = cn[i];
        }
    }
    char *on = onb.buf;
    int64_t *out = outb.buf, *busy = busyb.buf;
    /* a folding group writes no pairs: out bounds nothing (np still counts the ended transactions) */
    Py_ssize_t room = g->fold ? PY_SSIZE_T_MAX / 4 : outb.len / (Py_ssize_t)(2 * sizeof(int64_t)), np = 0;
    struct epoll_event evs[256];
    int64_t now = now_ns();
    for (int i = 0; i < k; i++) {
        native_t *n = cn[i];
        if (!n)
            continue;
        if (n->mx_phase == MX_IDLE && on[i] && now < until && np + k < room) {
            PyObject *e = NULL;
            /* from now: the time the caller spent between two calls is not this transaction's */
            int r = mx_begin(n, now, keep, &e);
            if (r == 0)
                r = mx_ended(g, n, i, on, until, out, &np, room, k, keep, &e);
            if (r < 0 && mx_fail(n, i, e, errors, on) < 0)
                goto done;
        }
        if (mx_watch(g, i, n) < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
    }
    for (;;) {
        now = now_ns();
        if (PyList_GET_SIZE(errors) || now >= until || np + k >= room)
            break;
        int ms = (int)((until - now + 999999) / 1000000);
        g->waits++;
        int got = epoll_wait(g->ep, evs, 256, ms);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        for (int j = 0; j < got; j++) {
            int i = (int)evs[j].data.u32;
            native_t *n = i < k ? cn[i] : NULL;
            if (!n || n->mx_phase == MX_IDLE) { /* nothing in flight: let the slot go until it sends again */
                if (i < k)
                    mx_unwatch(g, i);
                continue;
            }
            PyObject *e = NULL;
            uint32_t ev = evs[j].events;
            int r = mx_progress(n, ev, &e);
            for (int more = 0; r == 1; more++) {
                n->mx_phase = MX_IDLE;
                stmt_done(n, &n->mx_x, n->mx_x.pc, keep);
                r = mx_resume(n, keep, &e);
                if (r == 0)
                    r = mx_ended(g, n, i, on, until, out, &np, room, k, keep, &e);
                /* r == 1: the next statement was sent; its answer may be in already (mxgroup_t.eager) */
                if (r != 1 || more >= g->eager || n->engine != ENGINE_PG)
                    break;
                r = mx_progress(n, EPOLLIN, &e);
                g->early += r == 1;
            }
            if (r < 0 && mx_fail(n, i, e, errors, on) < 0)
                goto done;
            if (mx_watch(g, i, n) < 0) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto done;
            }
        }
    }
    for (int i = 0; i < k; i++)
        busy[i] = cn[i] && cn[i]->mx_phase != MX_IDLE ? cn[i]->mx_x.ts : 0;
    ret = Py_BuildValue("(nO)", np, errors);
done:
    Py_XDECREF(errors);
    free(cn);
    PyBuffer_Release(&onb);
    PyBuffer_Release(&outb);
    PyBuffer_Release(&busyb);
    return ret;
}

static PyMethodDef methods[] = {
    {"pg_open", pg_open, METH_VARARGS, "Connect through a libpq found at a path (see the module source)."},
    {"my_open", my_open, METH_VARARGS, "Connect through a libmariadb found at a path."},
    {"exec_simple", exec_simple, METH_VARARGS, "One text statement on the native connection."},
    {"session_id", session_id, METH_VARARGS, "The server's id of the native connection (0: unknown)."},
    {"prepare", prepare, METH_VARARGS, "Prepare a statement; its index."},
    {"load", load, METH_VARARGS, "Load (and check) the transaction program."},
    {"run", run, METH_VARARGS, "Run the program's transactions until a deadline."},
    {"drain", drain, METH_VARARGS, "Per-statement latency counts since the last drain."},
    {"stats", stats, METH_VARARGS, "Per-statement executions, rows, ns."},
    {"counts", counts, METH_VARARGS, "Statements and tallies of the completed transactions since the last call."},
    {"close", close_, METH_VARARGS, "Close the native connection."},
    {"mx_group", mx_group, METH_VARARGS, "A group of connection slots for mx_run."},
    {"mx_init", mx_init, METH_VARARGS, "Ready a connection for mx_run; whether its library can be multiplexed."},
    {"mx_run", mx_run, METH_VARARGS, "Keep a transaction in flight on each of many connections until a deadline."},
    {"mx_stats", mx_stats, METH_VARARGS, "A group's epoll_wait and epoll_ctl calls so far."},
    {"mx_take", mx_take, METH_VARARGS, "A folding group's transactions per slot and latency counts since the last take."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "workloads.native._native",
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
        {"OP_EXEC", OP_EXEC}, {"OP_SIMPLE", OP_SIMPLE}, {"OP_JMP", OP_JMP}, {"OP_JZ", OP_JZ}, {"OP_LT", OP_LT},
        {"OP_EQ", OP_EQ}, {"OP_OR", OP_OR}, {"OP_ROWS", OP_ROWS}, {"OP_COL", OP_COL}, {"OP_SCOL", OP_SCOL},
        {"OP_VARX", OP_VARX}, {"OP_STOREX", OP_STOREX}, {"OP_SORT", OP_SORT}, {"OP_SEQ", OP_SEQ},
        {"OP_FMT", OP_FMT}, {"OP_TALLY", OP_TALLY}, {"P_CENTS", P_CENTS}, {"P_SREG", P_SREG},
        {"MAX_COLS", MAX_COLS}, {"MAX_SREGS", MAX_SREGS}, {"MAX_TALLY", MAX_TALLY}, {"MAX_SCALE", MAX_SCALE},
        {"MAX_DIGITS", MAX_DIGITS}, {"MAX_JUMPS", MAX_JUMPS}, {"MAX_STR", MAX_STR}, {"MAX_VARS", MAX_VARS},
        {"MAX_STMTS", MAX_STMTS}, {"MAX_PARAMS", MAX_PARAMS}, {"MAX_PROG", MAX_PROG}, {"MAX_STACK", MAX_STACK}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (PyModule_AddIntConstant(m, ops[i].name, ops[i].v) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    return m;
}

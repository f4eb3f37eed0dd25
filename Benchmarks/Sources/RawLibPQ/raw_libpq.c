#include "raw_libpq.h"
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sched.h>

struct raw_conn { PGconn *pg; int64_t busy_poll_ns; };

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

raw_conn *raw_connect(const char *conninfo) {
    PGconn *pg = PQconnectdb(conninfo);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "raw connect failed: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    raw_conn *conn = malloc(sizeof(raw_conn));
    conn->pg = pg;
    conn->busy_poll_ns = 0;
    return conn;
}

void raw_set_busy_poll(raw_conn *conn, int64_t nanoseconds) { conn->busy_poll_ns = nanoseconds; }

/* PQexecPrepared, or with a busy-poll window: send, then poll the socket with sched_yield until the reply is
   there or the window is over, then sleep in poll() (what Skyros's Connection does, without its adaptivity). */
static PGresult *exec_prepared(raw_conn *conn, const char *name, int n, const char *const *values) {
    if (conn->busy_poll_ns == 0) return PQexecPrepared(conn->pg, name, n, values, NULL, NULL, 0);
    PGconn *pg = conn->pg;
    if (!PQsendQueryPrepared(pg, name, n, values, NULL, NULL, 0)) return NULL;
    int64_t until = now_ns() + conn->busy_poll_ns;
    while (PQconsumeInput(pg) && PQisBusy(pg)) {
        if (now_ns() < until) { sched_yield(); continue; }
        struct pollfd fd = {PQsocket(pg), POLLIN, 0};
        poll(&fd, 1, -1);
    }
    PGresult *result = PQgetResult(pg), *extra;
    while ((extra = PQgetResult(pg)) != NULL) PQclear(extra);
    return result;
}

void raw_finish(raw_conn *conn) { PQfinish(conn->pg); free(conn); }

static int ok(PGresult *r) {
    ExecStatusType s = PQresultStatus(r);
    int good = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
    if (!good) fprintf(stderr, "raw error: %s", PQresultErrorMessage(r));
    PQclear(r);
    return good;
}

int raw_exec(raw_conn *conn, const char *sql) { return ok(PQexec(conn->pg, sql)) ? 0 : 1; }

static int prepare(raw_conn *conn, const char *name, const char *sql, int n, const Oid *types) {
    PGresult *r = PQdescribePrepared(conn->pg, name);
    int exists = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (exists) return 1;
    return ok(PQprepare(conn->pg, name, sql, n, types));
}

/* Reads a pipeline's results up to its sync and leaves pipeline mode; 0 if any statement failed. */
static int finish_pipeline(PGconn *pg) {
    int failed = 0;
    for (;;) {
        PGresult *r = PQgetResult(pg);
        if (r == NULL) continue;
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_PIPELINE_SYNC) { PQclear(r); break; }
        if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) failed = 1;
        PQclear(r);
    }
    PQexitPipelineMode(pg);
    return !failed;
}

int64_t raw_point_selects(raw_conn *conn, int n, int rows) {
    Oid types[1] = {20};
    if (!prepare(conn, "raw_point", "SELECT id, name, score FROM bench_items WHERE id = $1", 1, types)) return -1;
    char id[24];
    const char *values[1] = {id};
    volatile int64_t sink = 0;
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%d", 1 + i % rows);
        PGresult *r = exec_prepared(conn, "raw_point", 1, values);
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) { PQclear(r); return -1; }
        int64_t got = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        char *name = strdup(PQgetvalue(r, 0, 1));
        double score = strtod(PQgetvalue(r, 0, 2), NULL);
        sink += got + (int64_t)score + (int64_t)strlen(name);
        free(name);
        PQclear(r);
    }
    return now_ns() - start;
}

int64_t raw_inserts(raw_conn *conn, int n, int64_t first_id) {
    Oid types[2] = {20, 25};
    if (!prepare(conn, "raw_insert", "INSERT INTO bench_insert (id, name) VALUES ($1, $2)", 2, types)) return -1;
    char id[24];
    const char *values[2] = {id, "benchmark row"};
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%lld", (long long)(first_id + i));
        if (!ok(exec_prepared(conn, "raw_insert", 2, values))) return -1;
    }
    return now_ns() - start;
}

int64_t raw_sequential_transaction(raw_conn *conn, int n, int64_t first_id) {
    Oid types[2] = {20, 25};
    if (!prepare(conn, "raw_insert", "INSERT INTO bench_insert (id, name) VALUES ($1, $2)", 2, types)) return -1;
    char id[24];
    const char *values[2] = {id, "benchmark row"};
    int64_t start = now_ns();
    if (!ok(PQexec(conn->pg, "BEGIN"))) return -1;
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%lld", (long long)(first_id + i));
        if (!ok(PQexecPrepared(conn->pg, "raw_insert", 2, values, NULL, NULL, 0))) return -1;
    }
    if (!ok(PQexec(conn->pg, "COMMIT"))) return -1;
    return now_ns() - start;
}

/* The statements of the pipeline are the prepared `raw_insert` (as Skyros's pipeline uses its prepared
   statements): the fastest way libpq sends one row per statement. */
int64_t raw_pipeline_transaction(raw_conn *conn, int n, int64_t first_id) {
    Oid types[2] = {20, 25};
    if (!prepare(conn, "raw_insert", "INSERT INTO bench_insert (id, name) VALUES ($1, $2)", 2, types)) return -1;
    char id[24];
    const char *values[2] = {id, "benchmark row"};
    PGconn *pg = conn->pg;
    int64_t start = now_ns();
    if (!PQenterPipelineMode(pg)) return -1;
    PQsetnonblocking(pg, 1);
    PQsendQueryParams(pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%lld", (long long)(first_id + i));
        PQsendQueryPrepared(pg, "raw_insert", 2, values, NULL, NULL, 0);
        if (i % 256 == 255) { PQflush(pg); PQconsumeInput(pg); }
    }
    PQsendQueryParams(pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    PQpipelineSync(pg);
    while (PQflush(pg) == 1) { PQconsumeInput(pg); }
    PQsetnonblocking(pg, 0);
    if (!finish_pipeline(pg)) return -1;
    return now_ns() - start;
}

int64_t raw_fetch_100(raw_conn *conn, int n) {
    Oid types[1] = {701};
    if (!prepare(conn, "raw_fetch", "SELECT id, name, score FROM bench_items WHERE score < $1 ORDER BY id", 1, types)) return -1;
    const char *values[1] = {"10"};
    volatile int64_t sink = 0;
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        PGresult *r = PQexecPrepared(conn->pg, "raw_fetch", 1, values, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) { PQclear(r); return -1; }
        int rows = PQntuples(r);
        for (int j = 0; j < rows; j++) {
            int64_t id = strtoll(PQgetvalue(r, j, 0), NULL, 10);
            char *name = strdup(PQgetvalue(r, j, 1));
            double score = strtod(PQgetvalue(r, j, 2), NULL);
            sink += id + (int64_t)score + (int64_t)strlen(name);
            free(name);
        }
        PQclear(r);
    }
    return now_ns() - start;
}

/* The statement a writer runs so that the capture names it as the entry's writer (ChangeLog.originStatement):
   its id and the rows it changes; the capture's triggers then write the log row and send the hint at COMMIT. */
#define ORIGIN_STATEMENT \
    "SELECT set_config('skyros.origin', $1, true), set_config('skyros.origin_rows', '1', true), " \
    "set_config('skyros.announced', '', true)"

/* Queues, in pipeline mode, the transaction a durable Skyros write sends: the prepared write, the commit-id
   row, the statement naming the writer (no such statement when origin is NULL: a stack without the change
   feed), then a sync, which commits them as one implicit transaction (statements prepared by the caller). The
   table is captured, so its triggers write the change log and send the hint either way. */
static int send_durable_transaction(PGconn *pg, const char *write, int n, const char *const *write_values,
                                    const char *commit, const char *origin, const char *const *origin_values) {
    if (!PQenterPipelineMode(pg)) return 0;
    PQsendQueryPrepared(pg, write, n, write_values, NULL, NULL, 0);
    PQsendQueryPrepared(pg, commit, 0, NULL, NULL, NULL, 0);
    if (origin != NULL) PQsendQueryPrepared(pg, origin, 1, origin_values, NULL, NULL, 0);
    return PQpipelineSync(pg);
}

/* What a durable one-row write sends, as raw libpq: one pipeline per write holding the INSERT, the commit-id
   row, the statement naming the writer, then the sync (the statements Skyros's group commit sends for a group
   of one), as prepared statements. bench_insert is captured (a stack maps it), so the capture's triggers write
   the change-log row and the hint in the same transaction, as for any client. The server-side floor of a
   durable write with idempotency and change announcements. */
int64_t raw_durable_transactions(raw_conn *conn, int n, int64_t first_id, int announced) {
    Oid types[2] = {20, 25};
    if (!prepare(conn, "raw_durable_insert", "INSERT INTO bench_insert (id, name) VALUES ($1, $2)", 2, types)) return -1;
    if (!prepare(conn, "raw_durable_commit", "INSERT INTO skyros_commit_groups (first_id, last_id) SELECT u, u FROM gen_random_uuid() AS u", 0, NULL)) return -1;
    Oid text_type[1] = {25};
    if (!prepare(conn, "raw_durable_origin", ORIGIN_STATEMENT, 1, text_type)) return -1;
    char id[24];
    const char *values[2] = {id, "benchmark row"};
    const char *origin_values[1] = {"6f1d8a52-93c4-4c1e-9a57-2b8f0e7d4c31"};
    PGconn *pg = conn->pg;
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%lld", (long long)(first_id + i));
        if (!send_durable_transaction(pg, "raw_durable_insert", 2, values, "raw_durable_commit", announced ? "raw_durable_origin" : NULL, origin_values)) return -1;
        if (!finish_pipeline(pg)) return -1;
    }
    return now_ns() - start;
}

/* A psql-style writer: n autocommit one-row UPDATEs of `table` (columns id, n), ids cycling through 1...rows,
   each its own transaction, prepared once per table. No Skyros statement: whatever the table's triggers do is
   all the announcing there is. */
int64_t raw_single_row_updates(raw_conn *conn, const char *table, int n, int rows) {
    char name[96], sql[160];
    snprintf(name, sizeof name, "raw_upd_%s", table);
    snprintf(sql, sizeof sql, "UPDATE %s SET n = n + 1 WHERE id = $1", table);
    Oid types[1] = {20};
    if (!prepare(conn, name, sql, 1, types)) return -1;
    char id[24];
    const char *values[1] = {id};
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "%d", 1 + i % rows);
        if (!ok(PQexecPrepared(conn->pg, name, 1, values, NULL, NULL, 0))) return -1;
    }
    return now_ns() - start;
}

/* n autocommit runs of one statement without parameters (say, an UPDATE of every row of a table). */
int64_t raw_repeat_statement(raw_conn *conn, const char *sql, int n) {
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        if (!ok(PQexec(conn->pg, sql))) return -1;
    }
    return now_ns() - start;
}

/* One autocommit UPDATE of bench_observe row `id` to `value`, as psql or a job in another language would send
   it. Returns ns or -1. */
int64_t raw_update_counter(raw_conn *conn, int64_t id, int64_t value) {
    Oid types[2] = {20, 20};
    if (!prepare(conn, "raw_counter_update", "UPDATE bench_observe SET n = $2 WHERE id = $1", 2, types)) return -1;
    char id_text[24], value_text[24];
    snprintf(id_text, sizeof id_text, "%lld", (long long)id);
    snprintf(value_text, sizeof value_text, "%lld", (long long)value);
    const char *values[2] = {id_text, value_text};
    int64_t start = now_ns();
    if (!ok(PQexecPrepared(conn->pg, "raw_counter_update", 2, values, NULL, NULL, 0))) return -1;
    return now_ns() - start;
}

/* The change-log row a client wrote before the capture (as ChangeLog.recordWithEntrySQL), with its pg_notify
   on `channel`, the hint tagged as Skyros tags it (one parameter: the changes' JSON). The observer baseline
   below keeps it: it is the hand-made equivalent of the capture's work on an uncaptured table. */
#define LOG_STATEMENT(channel) \
    "WITH entry AS (INSERT INTO skyros_change_log (origin, changes) VALUES (gen_random_uuid(), $1) " \
    "RETURNING position, origin, xid), " \
    "hint AS (SELECT position, position::text || ' ' || origin::text || ' ' || xid::text AS head FROM entry) " \
    "SELECT position, pg_notify('" channel "', head || ' ' || coalesce((SELECT encode(substring(sha256(" \
    "s.hint_outer || sha256(s.hint_inner || convert_to(head || ' ' || $1, 'UTF8'))) FROM 1 FOR 16), 'hex') " \
    "FROM skyros_change_log_state AS s), '-') || ' ' || $1) FROM hint"

/* The work behind one observer event, by hand. A writer connection sends the transaction Skyros's durable
   update sends (the UPDATE returning the row's version, the commit-id row, the change-log row with its
   pg_notify, then the sync) as one pipeline; an observer connection that LISTENs waits for the notification and
   reads the row again. One thread drives both connections, so there is no hand-off between threads: the
   floor for the same work. Its own table (bench_observe_raw) keeps the stacks' observers out of it. */
int raw_observe_prepare(raw_conn *writer, raw_conn *observer) {
    Oid types[2] = {20, 25};
    if (!prepare(writer, "raw_obs_update", "UPDATE bench_observe_raw SET n = $1 WHERE id = 1 RETURNING xmin::text", 1, types)) return -1;
    if (!prepare(writer, "raw_obs_commit", "INSERT INTO skyros_commit_groups (first_id, last_id) SELECT u, u FROM gen_random_uuid() AS u", 0, NULL)) return -1;
    if (!prepare(writer, "raw_obs_log",
            LOG_STATEMENT("skyros_raw_observe"), 1, types + 1)) return -1;
    if (!prepare(observer, "raw_obs_read", "SELECT id, n, xmin::text FROM bench_observe_raw WHERE id = $1", 1, types)) return -1;
    return raw_exec(observer, "LISTEN skyros_raw_observe") == 0 ? 0 : -1;
}

int64_t raw_observe_once(raw_conn *writer, raw_conn *observer, int64_t value) {
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)value);
    const char *update_values[1] = {n};
    const char *log_values[1] = {"[{\"t\":\"bench_observe_raw\",\"o\":20,\"i\":\"1\",\"k\":\"u\"}]"};
    const char *read_values[1] = {"1"};
    PGconn *w = writer->pg, *o = observer->pg;
    int64_t start = now_ns();
    if (!send_durable_transaction(w, "raw_obs_update", 1, update_values, "raw_obs_commit", "raw_obs_log", log_values)) return -1;
    if (PQflush(w) != 0) return -1;
    for (;;) {
        if (!PQconsumeInput(o)) return -1;
        PGnotify *note = PQnotifies(o);
        if (note != NULL) { PQfreemem(note); break; }
        struct pollfd fd = {PQsocket(o), POLLIN, 0};
        poll(&fd, 1, -1);
    }
    PGresult *r = PQexecPrepared(o, "raw_obs_read", 1, read_values, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || strtoll(PQgetvalue(r, 0, 1), NULL, 10) != value) {
        PQclear(r);
        return -1;
    }
    PQclear(r);
    int64_t elapsed = now_ns() - start;
    if (!finish_pipeline(w)) return -1;
    return elapsed;
}

static int compare_ids(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

typedef struct { int64_t id; char *name; } raw_author;

int64_t raw_books_with_authors(raw_conn *conn, int n, int books) {
    Oid book_types[1] = {20};
    Oid author_types[1] = {1016};
    if (!prepare(conn, "raw_books", "SELECT id, author_id, title FROM bench_books WHERE id <= $1 ORDER BY id", 1, book_types)) return -1;
    if (!prepare(conn, "raw_authors", "SELECT id, name FROM bench_authors WHERE id = ANY($1)", 1, author_types)) return -1;
    char limit[32];
    snprintf(limit, sizeof limit, "%d", books);
    const char *book_values[1] = {limit};
    size_t capacity = (size_t)(books > 0 ? books : 1);
    int64_t *book_ids = malloc(sizeof(int64_t) * capacity);
    int64_t *book_authors = malloc(sizeof(int64_t) * capacity);
    char **titles = malloc(sizeof(char *) * capacity);
    int64_t *author_ids = malloc(sizeof(int64_t) * capacity);
    raw_author *found = malloc(sizeof(raw_author) * capacity);
    char *array = malloc(capacity * 21 + 3);
    volatile int64_t sink = 0;
    int64_t start = now_ns();
    for (int i = 0; i < n; i++) {
        PGresult *r = PQexecPrepared(conn->pg, "raw_books", 1, book_values, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) { PQclear(r); return -1; }
        int rows = PQntuples(r);
        if (rows > books) rows = books;
        for (int j = 0; j < rows; j++) {
            book_ids[j] = strtoll(PQgetvalue(r, j, 0), NULL, 10);
            book_authors[j] = strtoll(PQgetvalue(r, j, 1), NULL, 10);
            titles[j] = strdup(PQgetvalue(r, j, 2));
            author_ids[j] = book_authors[j];
        }
        PQclear(r);
        /* The distinct author ids, as an int8[] literal. */
        qsort(author_ids, (size_t)rows, sizeof(int64_t), compare_ids);
        size_t length = 0;
        array[length++] = '{';
        for (int j = 0; j < rows; j++) {
            if (j > 0 && author_ids[j] == author_ids[j - 1]) continue;
            if (length > 1) array[length++] = ',';
            length += (size_t)snprintf(array + length, 21, "%lld", (long long)author_ids[j]);
        }
        array[length++] = '}';
        array[length] = 0;
        const char *author_values[1] = {array};
        r = PQexecPrepared(conn->pg, "raw_authors", 1, author_values, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK) { PQclear(r); return -1; }
        int authors = PQntuples(r);
        if (authors > books) authors = books;
        for (int j = 0; j < authors; j++) {
            found[j].id = strtoll(PQgetvalue(r, j, 0), NULL, 10);
            found[j].name = strdup(PQgetvalue(r, j, 1));
        }
        PQclear(r);
        /* Each book's author, by id (binary search over the authors sorted by id). */
        qsort(found, (size_t)authors, sizeof(raw_author), compare_ids);
        for (int j = 0; j < rows; j++) {
            raw_author *author = bsearch(&book_authors[j], found, (size_t)authors, sizeof(raw_author), compare_ids);
            if (author) sink += book_ids[j] + (int64_t)strlen(titles[j]) + (int64_t)strlen(author->name);
            free(titles[j]);
        }
        for (int j = 0; j < authors; j++) free(found[j].name);
    }
    int64_t elapsed = now_ns() - start;
    free(book_ids);
    free(book_authors);
    free(titles);
    free(author_ids);
    free(found);
    free(array);
    return elapsed;
}

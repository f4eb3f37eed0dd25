#ifndef RAW_LIBPQ_H
#define RAW_LIBPQ_H
#include <stdint.h>

/// Opaque libpq connection for the baseline.
typedef struct raw_conn raw_conn;

raw_conn *raw_connect(const char *conninfo);
void raw_finish(raw_conn *conn);
/// Point selects and inserts wait for replies with a busy-poll window of this many ns (0, the default:
/// PQexecPrepared, which sleeps in poll()).
void raw_set_busy_poll(raw_conn *conn, int64_t nanoseconds);
/// Runs a statement without parameters; returns 0 on success.
int raw_exec(raw_conn *conn, const char *sql);
/// n prepared point selects by id (ids cycle through 1...rows), decoding every column. Returns elapsed ns or -1.
int64_t raw_point_selects(raw_conn *conn, int n, int rows);
/// n autocommit prepared inserts into bench_insert (id, name). Returns elapsed ns or -1.
int64_t raw_inserts(raw_conn *conn, int n, int64_t first_id);
/// n prepared inserts in one transaction, one round trip each. Returns elapsed ns or -1.
int64_t raw_sequential_transaction(raw_conn *conn, int n, int64_t first_id);
/// n inserts in one transaction in pipeline mode (one sync). Returns elapsed ns or -1.
int64_t raw_pipeline_transaction(raw_conn *conn, int n, int64_t first_id);
/// Fetches the 100 rows with score < 10 ordered by id, decoding every column, n times. Returns ns or -1.
int64_t raw_fetch_100(raw_conn *conn, int n);
/// n durable one-row writes as Skyros sends them: per write one pipeline of the INSERT into the captured
/// bench_insert, the commit-id row, the statement naming the writer for the capture (when announced is
/// non-zero; without: a stack without the change feed), then the sync. Returns elapsed ns or -1.
int64_t raw_durable_transactions(raw_conn *conn, int n, int64_t first_id, int announced);
/// n autocommit one-row UPDATEs (SET n = n + 1) of `table` (id, n), ids cycling through 1...rows. Returns ns or -1.
int64_t raw_single_row_updates(raw_conn *conn, const char *table, int n, int rows);
/// n autocommit runs of `sql` (no parameters). Returns ns or -1.
int64_t raw_repeat_statement(raw_conn *conn, const char *sql, int n);
/// One autocommit UPDATE of bench_observe row `id` to `value` (a psql-style writer). Returns ns or -1.
int64_t raw_update_counter(raw_conn *conn, int64_t id, int64_t value);
/// Prepares the observer baseline's statements and LISTENs on the observer connection; returns 0 on success.
int raw_observe_prepare(raw_conn *writer, raw_conn *observer);
/// One observer event done by hand: the writer's transaction with its NOTIFY, the observer's notification and
/// its re-read of the row. Returns ns from sending the transaction to having the row, or -1.
int64_t raw_observe_once(raw_conn *writer, raw_conn *observer, int64_t value);
/// n times: the books with id <= books (id, author_id, title), then their authors in one more query
/// (`id = ANY($1)`, the distinct author ids bound as one int8[] literal), every column decoded and each book
/// matched to its author. What a prefetch of `\.author` does, by hand. Returns elapsed ns or -1.
int64_t raw_books_with_authors(raw_conn *conn, int n, int books);

#endif

/* Commit → observer latency floor, no Skyros code. Two paths, in alternating blocks so they share the same
 * minutes:
 *   trigger-like: the writer's own transaction does the capture, in one round trip:
 *     BEGIN; UPDATE lat_trig.t SET n = v WHERE id = 1; INSERT INTO lat_trig.log …; SELECT pg_notify(…); COMMIT
 *   decoding: the writer does an autocommit UPDATE lat_dec.t SET n = v WHERE id = 1; a relay thread streaming a
 *     pgoutput slot (publication on lat_dec.t only) receives the Commit and at once does one transaction on its
 *     own connection: INSERT INTO lat_dec.log …; SELECT pg_notify(…); COMMIT, then confirms the LSN.
 * The observer (its own connection, LISTEN on both channels) waits for the path's hint, then reads
 * SELECT n FROM <schema>.t WHERE id = 1 and checks it is v; a read that still sees the old value is re-read and
 * counted (the relay can see a commit in the WAL before other snapshots see it committed).
 * Time: from the writer sending its statement until the observer has read v (CLOCK_MONOTONIC, one process).
 *
 *   latency URL SLOT PUBLICATION SAMPLES WARMUP BLOCK
 */
#include "stream.h"
#include <pthread.h>
#include <sys/select.h>

static const char *url, *slot, *pub;
static volatile int relay_ready = 0;
static volatile long relay_batches = 0, relay_commits = 0;

static void *relay_main(void *arg) {
  (void)arg;
  PGconn *w = connect_with(url, NULL, "floor_lat_relay_writer");
  PGconn *c = start_stream(url, "floor_lat_relay", slot, pub);
  stream_state s = {0};
  long written = 0;
  uint64_t written_lsn = 0;
  double last_status = now_s();
  char sql[512];
  relay_ready = 1;
  for (;;) {
    drain_stream(c, &s);
    long pending = s.commits - written;
    if (pending > 0) {
      uint64_t lsn = s.commit_end;
      snprintf(sql, sizeof sql,
               "BEGIN; INSERT INTO lat_dec.log (position) SELECT g FROM generate_series(%ld, %ld) AS g; "
               "SELECT pg_notify('floor_lat_dec', '%ld'); COMMIT", written + 1, s.commits, s.commits);
      if (!PQsendQuery(w, sql)) { fprintf(stderr, "relay: %s", PQerrorMessage(w)); exit(1); }
      PGresult *r;
      while ((r = PQgetResult(w)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) { fprintf(stderr, "relay write: %s", PQerrorMessage(w)); exit(1); }
        PQclear(r);
      }
      written = s.commits;
      written_lsn = lsn;
      relay_batches++;
      relay_commits = written;
      send_status(c, written_lsn);
      last_status = now_s();
      continue;
    }
    double now = now_s();
    if (s.reply_requested || now - last_status >= 1.0) {
      send_status(c, s.wal_end > written_lsn ? s.wal_end : written_lsn);
      s.reply_requested = 0;
      last_status = now;
    }
    struct timeval tv = {1, 0};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(PQsocket(c), &fds);
    if (select(PQsocket(c) + 1, &fds, NULL, NULL, &tv) < 0) { perror("select"); exit(1); }
  }
  return NULL;
}

static PGconn *writer, *observer;
static long stale_reads[2];

static void exec_ok(PGconn *c, const char *sql) {
  if (!PQsendQuery(c, sql)) { fprintf(stderr, "%s", PQerrorMessage(c)); exit(1); }
  PGresult *r;
  while ((r = PQgetResult(c)) != NULL) {
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) { fprintf(stderr, "%s: %s", sql, PQerrorMessage(c)); exit(1); }
    PQclear(r);
  }
}

/* Waits for a hint on `channel` (hints on the other channel are dropped). */
static void wait_hint(const char *channel) {
  double deadline = now_s() + 10;
  for (;;) {
    PGnotify *n;
    int got = 0;
    while ((n = PQnotifies(observer)) != NULL) {
      if (strcmp(n->relname, channel) == 0) got = 1;
      PQfreemem(n);
    }
    if (got) return;
    double left = deadline - now_s();
    if (left <= 0) { fprintf(stderr, "latency: no hint on %s within 10 s\n", channel); exit(3); }
    struct timeval tv = {(time_t)left, 0};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(PQsocket(observer), &fds);
    if (select(PQsocket(observer) + 1, &fds, NULL, NULL, &tv) < 0) { perror("select"); exit(1); }
    if (!PQconsumeInput(observer)) { fprintf(stderr, "observer: %s", PQerrorMessage(observer)); exit(1); }
  }
}

/* One sample; path 0 = trigger-like, 1 = decoding. Returns seconds. */
static double sample(int path, long v) {
  char sql[512];
  const char *schema = path ? "lat_dec" : "lat_trig";
  if (path)
    snprintf(sql, sizeof sql, "UPDATE lat_dec.t SET n = %ld WHERE id = 1", v);
  else
    snprintf(sql, sizeof sql,
             "BEGIN; UPDATE lat_trig.t SET n = %ld WHERE id = 1; INSERT INTO lat_trig.log (position) VALUES (%ld); "
             "SELECT pg_notify('floor_lat_trig', '%ld'); COMMIT", v, v, v);
  double t0 = now_s();
  exec_ok(writer, sql);
  wait_hint(path ? "floor_lat_dec" : "floor_lat_trig");
  snprintf(sql, sizeof sql, "SELECT n FROM %s.t WHERE id = 1", schema);
  for (int attempt = 0;; attempt++) {
    PGresult *r = PQexec(observer, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "observer: %s", PQerrorMessage(observer)); exit(1); }
    long seen = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (seen == v) break;
    if (attempt == 0) stale_reads[path]++;
    if (attempt > 100000) { fprintf(stderr, "latency: observer never saw %ld\n", v); exit(3); }
  }
  return now_s() - t0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile(double *xs, long n, double q) {
  long i = (long)(q * n + 0.999999) - 1;
  if (i < 0) i = 0;
  if (i >= n) i = n - 1;
  return xs[i];
}

int main(int argc, char **argv) {
  if (argc != 7) { fprintf(stderr, "usage: latency URL SLOT PUBLICATION SAMPLES WARMUP BLOCK\n"); return 2; }
  url = argv[1]; slot = argv[2]; pub = argv[3];
  long samples = atol(argv[4]), warmup = atol(argv[5]), block = atol(argv[6]);
  writer = connect_with(url, NULL, "floor_lat_writer");
  observer = connect_with(url, NULL, "floor_lat_observer");
  exec_ok(observer, "LISTEN floor_lat_trig; LISTEN floor_lat_dec");
  pthread_t t;
  pthread_create(&t, NULL, relay_main, NULL);
  while (!relay_ready) usleep(1000);
  long v = 1;
  PGresult *r = PQexec(writer, "SELECT greatest((SELECT n FROM lat_trig.t WHERE id = 1), (SELECT n FROM lat_dec.t WHERE id = 1))");
  if (PQresultStatus(r) == PGRES_TUPLES_OK) v = atol(PQgetvalue(r, 0, 0)) + 1;
  PQclear(r);
  for (long i = 0; i < warmup; i++) { sample(0, v++); sample(1, v++); }
  stale_reads[0] = stale_reads[1] = 0;
  long batches0 = relay_batches, commits0 = relay_commits;
  double *xs[2] = {malloc(sizeof(double) * samples), malloc(sizeof(double) * samples)};
  long n[2] = {0, 0};
  int first = 0;
  while (n[0] < samples || n[1] < samples) {
    for (int k = 0; k < 2; k++) {   /* ABBA: the path that goes first alternates block by block */
      int path = k ? 1 - first : first;
      for (long i = 0; i < block && n[path] < samples; i++) xs[path][n[path]++] = sample(path, v++);
    }
    first = 1 - first;
  }
  const char *names[2] = {"trigger-like", "decoding"};
  double p50[2], p99[2];
  for (int p = 0; p < 2; p++) {
    qsort(xs[p], n[p], sizeof(double), cmp);
    p50[p] = quantile(xs[p], n[p], 0.5);
    p99[p] = quantile(xs[p], n[p], 0.99);
    printf("%-12s samples %ld  p50 %.0f us  p90 %.0f us  p99 %.0f us  max %.0f us  stale first reads %ld\n",
           names[p], n[p], p50[p] * 1e6, quantile(xs[p], n[p], 0.9) * 1e6, p99[p] * 1e6,
           xs[p][n[p] - 1] * 1e6, stale_reads[p]);
  }
  printf("decoding / trigger-like: p50 %.2f  p99 %.2f   (relay: %ld batches for %ld commits)\n",
         p50[1] / p50[0], p99[1] / p99[0], relay_batches - batches0, relay_commits - commits0);
  fflush(stdout);
  _exit(0);
}

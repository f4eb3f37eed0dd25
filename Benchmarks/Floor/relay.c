/* A minimal decoding relay, no Skyros code: streams a pgoutput slot, counts decoded transactions (Commit
 * messages), and for each batch of transactions received since its last write does ONE transaction on a second
 * connection: INSERT one log row per transaction, pg_notify(channel, last position), COMMIT; then confirms the
 * batch's commit LSN to the server.
 *
 *   relay URL SLOT PUBLICATION SCHEMA WINDOW_MS
 *
 * WINDOW_MS = 0: write as soon as anything is queued (a batch is whatever arrived during the previous write).
 * WINDOW_MS > 0: at most one write + hint per window; a batch arriving when the last write is older than the
 * window (the relay was idle) is written at once. Prints "ready" once streaming. Positions continue from the
 * log's max(position), so the relay can be stopped and started between runs. */
#include "stream.h"
#include <sys/select.h>

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: relay URL SLOT PUBLICATION SCHEMA WINDOW_MS\n"); return 2; }
  const char *url = argv[1], *slot = argv[2], *pub = argv[3], *schema = argv[4];
  double window = atof(argv[5]) / 1000.0;
  setvbuf(stdout, NULL, _IOLBF, 0);

  PGconn *w = connect_with(url, NULL, "floor_relay_writer");
  char sql[1024];
  snprintf(sql, sizeof sql, "SELECT coalesce(max(position), 0), coalesce(max(batch), 0) FROM %s.log", schema);
  PGresult *r = PQexec(w, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "relay: %s", PQerrorMessage(w)); return 1; }
  long position = atol(PQgetvalue(r, 0, 0)), batch = atol(PQgetvalue(r, 0, 1));
  PQclear(r);

  PGconn *c = start_stream(url, "floor_relay", slot, pub);
  printf("ready\n");
  stream_state s = {0};
  long written_commits = 0;          /* commits already written to the log */
  uint64_t written_lsn = 0;          /* end LSN of the last commit written */
  double last_write = 0, last_status = now_s();
  for (;;) {
    drain_stream(c, &s);
    double now = now_s();
    long pending = s.commits - written_commits;
    if (pending > 0 && (window <= 0 || now - last_write >= window)) {
      last_write = now;
      uint64_t batch_lsn = s.commit_end;
      batch++;
      snprintf(sql, sizeof sql,
               "BEGIN; INSERT INTO %s.log (position, batch) SELECT g, %ld FROM generate_series(%ld, %ld) AS g; "
               "SELECT pg_notify('floor_chan', '%ld'); COMMIT",
               schema, batch, position + 1, position + pending, position + pending);
      if (!PQsendQuery(w, sql)) { fprintf(stderr, "relay: %s", PQerrorMessage(w)); return 1; }
      while ((r = PQgetResult(w)) != NULL) {
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) { fprintf(stderr, "relay write: %s", PQerrorMessage(w)); return 1; }
        PQclear(r);
      }
      position += pending;
      written_commits += pending;
      written_lsn = batch_lsn;
      send_status(c, written_lsn);
      last_status = now_s();
      continue;
    }
    /* Nothing queued: confirm what the server has sent (every transaction up to it is written) when asked,
     * and once a second. */
    if (pending == 0 && (s.reply_requested || now - last_status >= 1.0)) {
      uint64_t lsn = s.wal_end > written_lsn ? s.wal_end : written_lsn;
      send_status(c, lsn);
      s.reply_requested = 0;
      last_status = now;
    }
    double timeout = pending > 0 ? last_write + window - now : 1.0;
    if (timeout < 0) timeout = 0;
    struct timeval tv = {(time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6)};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(PQsocket(c), &fds);
    if (select(PQsocket(c) + 1, &fds, NULL, NULL, &tv) < 0) { perror("select"); return 1; }
  }
}

/* A minimal listening instance, no Skyros code: LISTEN floor_chan; on each wake-up (all hints pending at that
 * moment count as one), read the new log rows' count and highest position past the last one seen, and advance.
 *
 *   listener URL SCHEMA
 *
 * Prints "ready" once listening. Runs until killed. */
#include "stream.h"
#include <sys/select.h>

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: listener URL SCHEMA\n"); return 2; }
  setvbuf(stdout, NULL, _IOLBF, 0);
  PGconn *c = connect_with(argv[1], NULL, "floor_listener");
  char sql[512];
  PGresult *r = PQexec(c, "LISTEN floor_chan");
  if (PQresultStatus(r) != PGRES_COMMAND_OK) { fprintf(stderr, "listener: %s", PQerrorMessage(c)); return 1; }
  PQclear(r);
  snprintf(sql, sizeof sql, "SELECT coalesce(max(position), 0) FROM %s.log", argv[2]);
  r = PQexec(c, sql);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "listener: %s", PQerrorMessage(c)); return 1; }
  long last = atol(PQgetvalue(r, 0, 0));
  PQclear(r);
  printf("ready\n");
  for (;;) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(PQsocket(c), &fds);
    if (select(PQsocket(c) + 1, &fds, NULL, NULL, NULL) < 0) { perror("select"); return 1; }
    if (!PQconsumeInput(c)) { fprintf(stderr, "listener: %s", PQerrorMessage(c)); return 1; }
    int hints = 0;
    PGnotify *n;
    while ((n = PQnotifies(c)) != NULL) { hints++; PQfreemem(n); }
    if (hints == 0) continue;
    snprintf(sql, sizeof sql, "SELECT count(*), coalesce(max(position), %ld) FROM %s.log WHERE position > %ld",
             last, argv[2], last);
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) { fprintf(stderr, "listener: %s", PQerrorMessage(c)); return 1; }
    last = atol(PQgetvalue(r, 0, 1));
    PQclear(r);
  }
}

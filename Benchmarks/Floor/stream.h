/* Minimal logical-replication client on libpq, shared by relay.c and latency.c: START_REPLICATION with pgoutput
 * (proto_version 1), parse the CopyData stream (XLogData 'w', keepalive 'k'), recognise pgoutput's Commit ('C'),
 * and send standby status updates. No Skyros code: this is the floor any decoding relay pays. */
#ifndef FLOOR_STREAM_H
#define FLOOR_STREAM_H
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline uint64_t get_u64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = (v << 8) | (unsigned char)p[i];
  return v;
}

static inline void put_u64(char *p, uint64_t v) {
  for (int i = 7; i >= 0; i--) { p[i] = (char)(v & 0xff); v >>= 8; }
}

/* A connection from a URL/conninfo plus extra keywords (expand_dbname keeps the URL's own settings). */
static inline PGconn *connect_with(const char *url, const char *replication, const char *appname) {
  const char *keys[4], *vals[4];
  int n = 0;
  keys[n] = "dbname"; vals[n++] = url;
  if (replication) { keys[n] = "replication"; vals[n++] = replication; }
  keys[n] = "application_name"; vals[n++] = appname;
  keys[n] = NULL; vals[n] = NULL;
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "%s: connect failed: %s", appname, PQerrorMessage(c));
    exit(1);
  }
  return c;
}

/* START_REPLICATION on a slot; retries while the slot is still held by a walsender of a process that just went
 * away (the server notices the closed connection a moment later). */
static inline PGconn *start_stream(const char *url, const char *appname, const char *slot, const char *pub) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "START_REPLICATION SLOT %s LOGICAL 0/0 (proto_version '1', publication_names '%s')", slot, pub);
  for (int attempt = 0; attempt < 200; attempt++) {
    PGconn *c = connect_with(url, "database", appname);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) == PGRES_COPY_BOTH) { PQclear(r); return c; }
    if (attempt == 199) fprintf(stderr, "%s: START_REPLICATION failed: %s", appname, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    usleep(50000);
  }
  exit(1);
}

/* Standby status update ('r'): written = flushed = applied = lsn. */
static inline void send_status(PGconn *c, uint64_t lsn) {
  char buf[34];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  /* microseconds since 2000-01-01 */
  uint64_t pgnow = (uint64_t)(ts.tv_sec - 946684800) * 1000000 + ts.tv_nsec / 1000;
  buf[0] = 'r';
  put_u64(buf + 1, lsn);
  put_u64(buf + 9, lsn);
  put_u64(buf + 17, lsn);
  put_u64(buf + 25, pgnow);
  buf[33] = 0;
  if (PQputCopyData(c, buf, sizeof buf) != 1 || PQflush(c) != 0) {
    fprintf(stderr, "status update failed: %s", PQerrorMessage(c));
    exit(1);
  }
}

typedef struct {
  long commits;          /* Commit messages seen */
  uint64_t commit_end;   /* end LSN of the last Commit seen */
  uint64_t wal_end;      /* latest server WAL end from a keepalive */
  int reply_requested;   /* a keepalive asked for a status update */
} stream_state;

/* Handles every complete message buffered on the stream without blocking. Returns how many were handled;
 * exits on a stream error. */
static inline int drain_stream(PGconn *c, stream_state *s) {
  int handled = 0;
  if (!PQconsumeInput(c)) { fprintf(stderr, "stream: %s", PQerrorMessage(c)); exit(1); }
  for (;;) {
    char *buf = NULL;
    int len = PQgetCopyData(c, &buf, 1);
    if (len == 0) break;
    if (len < 0) { fprintf(stderr, "stream ended: %s", PQerrorMessage(c)); exit(1); }
    handled++;
    if (buf[0] == 'w' && len > 25) {
      const char *msg = buf + 25;   /* 'w', start LSN, end LSN, send time */
      if (msg[0] == 'C' && len >= 25 + 26) {  /* 'C', flags, commit LSN, end LSN, commit time */
        s->commits++;
        s->commit_end = get_u64(msg + 10);
      }
    } else if (buf[0] == 'k' && len >= 18) {
      s->wal_end = get_u64(buf + 1);
      if (buf[17]) s->reply_requested = 1;
    }
    PQfreemem(buf);
  }
  return handled;
}
#endif

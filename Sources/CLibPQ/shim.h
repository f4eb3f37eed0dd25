#ifndef SKYROS_CLIBPQ_SHIM_H
#define SKYROS_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#include <poll.h>

/* Field codes are macros in postgres_ext.h; expose them as constants Swift can see. */
static inline int skyros_diag_severity(void) { return 'S'; }
static inline int skyros_diag_severity_nonlocalized(void) { return 'V'; }
static inline int skyros_diag_sqlstate(void) { return 'C'; }
static inline int skyros_diag_message_primary(void) { return 'M'; }
static inline int skyros_diag_message_detail(void) { return 'D'; }
static inline int skyros_diag_message_hint(void) { return 'H'; }
static inline int skyros_diag_statement_position(void) { return 'P'; }
static inline int skyros_diag_schema_name(void) { return 's'; }
static inline int skyros_diag_table_name(void) { return 't'; }
static inline int skyros_diag_column_name(void) { return 'c'; }
static inline int skyros_diag_datatype_name(void) { return 'd'; }
static inline int skyros_diag_constraint_name(void) { return 'n'; }

#endif

/// A PostgreSQL SQLSTATE error code, such as `23505` (unique violation).
///
/// Match a whole class with the `~=` operator and a class constant (a code ending in `000`), on either side of
/// an optional code (as ``PGError/sqlState`` is), or in a `switch`:
///
/// ```swift
/// do { try await connection.query("INSERT …") }
/// catch let error as PGError where error.sqlState ~= .integrityConstraintViolation { … }
///
/// switch error.sqlState {
/// case .uniqueViolation: …                 // this code only
/// case .integrityConstraintViolation: …    // any other code of class 23
/// default: …
/// }
/// ```
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The five-character code.
    public let rawValue: String

    /// Wraps a five-character SQLSTATE, such as `"23505"`; any code is accepted, named or not.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a five-character SQLSTATE: `SQLState("23505") == .uniqueViolation`.
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The two-character class of this code (`"23"` for `23505`).
    public var errorClass: String { String(self.rawValue.prefix(2)) }
    /// The five-character code, as the server sent it.
    public var description: String { self.rawValue }

    /// True when `pattern` is a class code (ends in `000`) containing `value`, or equals it.
    public static func ~= (pattern: SQLState, value: SQLState?) -> Bool {
        guard let value else { return false }
        return pattern ~= value
    }

    /// The same match with the code first (`error.sqlState ~= .integrityConstraintViolation`). Without it that
    /// spelling compiled to the standard library's `~=` for `Equatable` values: plain equality, never a class.
    public static func ~= (value: SQLState?, pattern: SQLState) -> Bool {
        pattern ~= value
    }

    /// The same match for a non-optional code (in a `switch` over one, the standard library's `~=` for
    /// `Equatable` values would otherwise compare for equality only). The pattern comes first: a server that
    /// sends a class's generic code (`23000`) matches `.integrityConstraintViolation`, never `.uniqueViolation`.
    public static func ~= (pattern: SQLState, value: SQLState) -> Bool {
        if pattern.rawValue.hasSuffix("000") { return value.errorClass == pattern.errorClass }
        return pattern == value
    }

    /// `00000` successful_completion: no error.
    public static let successfulCompletion = SQLState("00000")
    /// `08000` connection_exception, class 08: matches every connection error with `~=`.
    public static let connectionException = SQLState("08000")
    /// `08003` connection_does_not_exist.
    public static let connectionDoesNotExist = SQLState("08003")
    /// `08006` connection_failure: the connection broke while in use.
    public static let connectionFailure = SQLState("08006")
    /// `0A000` feature_not_supported.
    public static let featureNotSupported = SQLState("0A000")
    /// `28000` invalid_authorization_specification, class 28: the role may not log in (see also ``invalidPassword``).
    public static let invalidAuthorizationSpecification = SQLState("28000")
    /// `28P01` invalid_password: password authentication failed.
    public static let invalidPassword = SQLState("28P01")
    /// `22000` data_exception, class 22: matches every invalid-value error with `~=`.
    public static let dataException = SQLState("22000")
    /// `22021` character_not_in_repertoire: text that is not valid in the database's encoding.
    public static let characterNotInRepertoire = SQLState("22021")
    /// `22P02` invalid_text_representation: a value's text does not parse as its type (`'abc'::int`).
    public static let invalidTextRepresentation = SQLState("22P02")
    /// `22003` numeric_value_out_of_range: a number too large for its column's type.
    public static let numericValueOutOfRange = SQLState("22003")
    /// `22012` division_by_zero.
    public static let divisionByZero = SQLState("22012")
    /// `22001` string_data_right_truncation: text longer than its `varchar(n)` column.
    public static let stringDataRightTruncation = SQLState("22001")
    /// `23000` integrity_constraint_violation, class 23: matches every constraint violation with `~=`.
    public static let integrityConstraintViolation = SQLState("23000")
    /// `23502` not_null_violation: NULL in a `NOT NULL` column.
    public static let notNullViolation = SQLState("23502")
    /// `23503` foreign_key_violation: a reference to a missing row, or a delete of a referenced one.
    public static let foreignKeyViolation = SQLState("23503")
    /// `23505` unique_violation: a duplicate key for a unique index or primary key.
    public static let uniqueViolation = SQLState("23505")
    /// `23514` check_violation: a row fails a `CHECK` constraint.
    public static let checkViolation = SQLState("23514")
    /// `23P01` exclusion_violation: a row conflicts with an `EXCLUDE` constraint.
    public static let exclusionViolation = SQLState("23P01")
    /// `25000` invalid_transaction_state, class 25.
    public static let invalidTransactionState = SQLState("25000")
    /// A prepared statement that does not exist (for example after `DEALLOCATE ALL` or `DISCARD ALL`).
    public static let invalidSQLStatementName = SQLState("26000")
    /// `25001` active_sql_transaction: a statement that cannot run inside a transaction block.
    public static let activeSQLTransaction = SQLState("25001")
    /// `25P02` in_failed_sql_transaction: a statement after an error, before `ROLLBACK`.
    public static let inFailedSQLTransaction = SQLState("25P02")
    /// `40000` transaction_rollback, class 40: the server rolled the transaction back; retrying may succeed.
    public static let transactionRollback = SQLState("40000")
    /// `40001` serialization_failure: a conflict under `REPEATABLE READ` or `SERIALIZABLE`; retry the transaction.
    public static let serializationFailure = SQLState("40001")
    /// `40P01` deadlock_detected: the server chose this transaction to break a deadlock; retry it.
    public static let deadlockDetected = SQLState("40P01")
    /// `42000` syntax_error_or_access_rule_violation, class 42: errors in the statement itself or its privileges.
    public static let syntaxErrorOrAccessRuleViolation = SQLState("42000")
    /// `42601` syntax_error.
    public static let syntaxError = SQLState("42601")
    /// `42501` insufficient_privilege: the role lacks a privilege the statement needs.
    public static let insufficientPrivilege = SQLState("42501")
    /// `42703` undefined_column.
    public static let undefinedColumn = SQLState("42703")
    /// `42P01` undefined_table: a table or view that does not exist (or is not on the `search_path`).
    public static let undefinedTable = SQLState("42P01")
    /// `42883` undefined_function: no function or operator with those argument types.
    public static let undefinedFunction = SQLState("42883")
    /// `42P07` duplicate_table: `CREATE TABLE` of a table that exists.
    public static let duplicateTable = SQLState("42P07")
    /// `42710` duplicate_object: creating an object (type, role, constraint) that exists.
    public static let duplicateObject = SQLState("42710")
    /// `42804` datatype_mismatch: a value of the wrong type for its column or operator.
    public static let datatypeMismatch = SQLState("42804")
    /// `53000` insufficient_resources, class 53.
    public static let insufficientResources = SQLState("53000")
    /// `53300` too_many_connections: `max_connections` reached; opening again later may succeed.
    public static let tooManyConnections = SQLState("53300")
    /// `57000` operator_intervention, class 57: an administrator or the server stopped the work.
    public static let operatorIntervention = SQLState("57000")
    /// `57014` query_canceled: a cancel request or `statement_timeout`.
    public static let queryCanceled = SQLState("57014")
    /// `57P01` admin_shutdown: the server is shutting down or the backend was terminated.
    public static let adminShutdown = SQLState("57P01")
    /// `57P02` crash_shutdown: another backend crashed and the server is restarting.
    public static let crashShutdown = SQLState("57P02")
    /// `57P03` cannot_connect_now: the server is starting up or shutting down.
    public static let cannotConnectNow = SQLState("57P03")
    /// `57P04` database_dropped.
    public static let databaseDropped = SQLState("57P04")
    /// `55P03` lock_not_available: `NOWAIT` or `lock_timeout` could not take a lock.
    public static let lockNotAvailable = SQLState("55P03")
    /// `55000` object_not_in_prerequisite_state (for example a replication slot in use).
    public static let objectNotInPrerequisiteState = SQLState("55000")
    /// `3D000` invalid_catalog_name: the database does not exist.
    public static let invalidCatalogName = SQLState("3D000")
    /// `3F000` invalid_schema_name: the schema does not exist.
    public static let invalidSchemaName = SQLState("3F000")
    /// `25006` read_only_sql_transaction: a write on a read-only transaction or a hot standby.
    public static let readOnlySQLTransaction = SQLState("25006")
}

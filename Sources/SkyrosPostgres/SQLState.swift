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

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The two-character class of this code (`"23"` for `23505`).
    public var errorClass: String { String(self.rawValue.prefix(2)) }
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

    public static let successfulCompletion = SQLState("00000")
    public static let connectionException = SQLState("08000")
    public static let connectionDoesNotExist = SQLState("08003")
    public static let connectionFailure = SQLState("08006")
    public static let featureNotSupported = SQLState("0A000")
    public static let invalidAuthorizationSpecification = SQLState("28000")
    public static let invalidPassword = SQLState("28P01")
    public static let dataException = SQLState("22000")
    public static let characterNotInRepertoire = SQLState("22021")
    public static let invalidTextRepresentation = SQLState("22P02")
    public static let numericValueOutOfRange = SQLState("22003")
    public static let divisionByZero = SQLState("22012")
    public static let stringDataRightTruncation = SQLState("22001")
    public static let integrityConstraintViolation = SQLState("23000")
    public static let notNullViolation = SQLState("23502")
    public static let foreignKeyViolation = SQLState("23503")
    public static let uniqueViolation = SQLState("23505")
    public static let checkViolation = SQLState("23514")
    public static let exclusionViolation = SQLState("23P01")
    public static let invalidTransactionState = SQLState("25000")
    /// A prepared statement that does not exist (for example after `DEALLOCATE ALL` or `DISCARD ALL`).
    public static let invalidSQLStatementName = SQLState("26000")
    public static let activeSQLTransaction = SQLState("25001")
    public static let inFailedSQLTransaction = SQLState("25P02")
    public static let transactionRollback = SQLState("40000")
    public static let serializationFailure = SQLState("40001")
    public static let deadlockDetected = SQLState("40P01")
    public static let syntaxErrorOrAccessRuleViolation = SQLState("42000")
    public static let syntaxError = SQLState("42601")
    public static let insufficientPrivilege = SQLState("42501")
    public static let undefinedColumn = SQLState("42703")
    public static let undefinedTable = SQLState("42P01")
    public static let undefinedFunction = SQLState("42883")
    public static let duplicateTable = SQLState("42P07")
    public static let duplicateObject = SQLState("42710")
    public static let datatypeMismatch = SQLState("42804")
    public static let insufficientResources = SQLState("53000")
    public static let tooManyConnections = SQLState("53300")
    public static let operatorIntervention = SQLState("57000")
    public static let queryCanceled = SQLState("57014")
    public static let adminShutdown = SQLState("57P01")
    public static let crashShutdown = SQLState("57P02")
    public static let cannotConnectNow = SQLState("57P03")
    public static let databaseDropped = SQLState("57P04")
    public static let lockNotAvailable = SQLState("55P03")
    public static let objectNotInPrerequisiteState = SQLState("55000")
    public static let invalidCatalogName = SQLState("3D000")
    public static let invalidSchemaName = SQLState("3F000")
    public static let readOnlySQLTransaction = SQLState("25006")
}

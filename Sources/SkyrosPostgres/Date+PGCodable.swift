import Foundation

extension Date: PGArrayElement {
    /// Dates are sent as `timestamptz` in UTC with microsecond precision; PostgreSQL casts them on assignment
    /// to `timestamp` and `date` columns in the session time zone, which is UTC unless
    /// ``PGConfiguration/sessionTimeZone`` says otherwise.
    public static var postgresType: PGType { .timestamptz }
    public static var postgresArrayType: PGType { .timestamptzArray }
    /// The `timestamptz` text; `Date.distantFuture` and `Date.distantPast` are sent as `infinity` and
    /// `-infinity`.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/encoding`` for a date PostgreSQL cannot store
    ///   (NaN, infinite, or outside 4714 BC to 294276 AD).
    public func postgresText() throws -> String? { try PGDateCoding.format(self) }
    /// The date as a `timestamptz` column stores it: rounded to the nearest microsecond (ties to even, as
    /// PostgreSQL rounds more fractional digits), so that a value kept in memory equals the one read back.
    ///
    /// ```swift
    /// Date(timeIntervalSince1970: 1_800_000_000.1234567).postgresStored   // ….123457
    /// ```
    package var postgresStored: Date { PGDateCoding.stored(self) }
    /// Decodes `timestamptz`, `timestamp` (read as UTC) and `date` (midnight UTC), every date PostgreSQL
    /// allows included (to 5874897 AD); `infinity` and `-infinity` decode as `Date.distantFuture` and
    /// `Date.distantPast`.
    /// - Throws: ``PGError`` of kind ``PGError/Kind/decoding`` for text that is not such a value.
    public init(postgresText bytes: ArraySlice<UInt8>, type: PGType) throws {
        guard [.timestamptz, .timestamp, .date, .unknown, .text].contains(type) else {
            throw typeMismatch(Date.self, type)
        }
        guard let value = PGDateCoding.parse(bytes) else { throw decodingError(Date.self, type, bytes) }
        self = value
    }
}

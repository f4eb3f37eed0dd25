/// A coding key named at run time: for test entities whose column names are not Swift identifiers, or are
/// chosen while the tests run.
package struct ColumnKey: CodingKey {
    package var stringValue: String
    package var intValue: Int? { nil }
    package init(_ name: String) { self.stringValue = name }
    package init?(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { nil }
}

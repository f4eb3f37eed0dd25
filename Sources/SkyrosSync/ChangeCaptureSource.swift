/// Where a schema's committed changes are read from (see "Change capture").
///
/// ```swift
/// var configuration = DataStackConfiguration(store: .postgres(url, schema: "app"), entities: [Ticket.self])
/// configuration.changeFeed.captureSource = .triggers   // the default is .automatic
/// ```
public enum ChangeCaptureSource: Sendable, Hashable {
    /// Statement-level triggers on each mapped table write every transaction's changed keys into the change
    /// log as it commits. Works on any server and role that may create triggers; every writer of a captured
    /// table pays for it.
    case triggers
    /// The server's logical decoding: one stack per schema (elected among the running ones) reads committed
    /// changes from the WAL through a publication and a permanent replication slot, and writes them into the
    /// change log. Nothing runs in the writers' transactions. Needs `wal_level = logical`, a free replication slot and
    /// WAL sender, and a role with the `REPLICATION` attribute (or a managed service's equivalent).
    case logicalDecoding
    /// Logical decoding where the server and the role allow it, else triggers; a schema already captured one way
    /// keeps it. The start logs which source runs and why. The default.
    case automatic
}

// Prelude of the docs' code blocks (scripts/check-snippets): the values a fragment takes as given (URLs, a logger,
// ids, …), as computed globals: they compile and are never evaluated (the blocks never run). Needs only the client.
import Foundation
import Logging
import SkyrosPostgres

/// Stands for a web framework's socket or server-sent-events writer.
struct WebSocket: Sendable {
    func send(_ value: some Sendable) async throws {}
}

var logger: Logger { fatalError() }
var databaseURL: String { fatalError() }
var url: String { fatalError() }
var primaryURL: String { fatalError() }
var standbyURL: String { fatalError() }
var pgbouncerURL: String { fatalError() }
var directURL: String { fatalError() }
var directPostgresURL: String { fatalError() }
var postgresConfiguration: PGConfiguration { fatalError() }
var websocket: WebSocket { fatalError() }

var id: UUID { fatalError() }
var ticketID: UUID { fatalError() }
var orderID: UUID { fatalError() }
var title: String { fatalError() }
var bobVersion: Int64 { fatalError() }
var v3: Int64 { fatalError() }
var amount: Int { fatalError() }
var from: UUID { fatalError() }
var to: UUID { fatalError() }

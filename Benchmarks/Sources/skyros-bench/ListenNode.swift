import Foundation
import Skyros

/// A listening stack for `Benchmarks/capture-cost` (`skyros-bench listen-node <triggers|logical> <schema>`): a
/// stack of its own on `<schema>` that maps the capture-cost tables with the given capture source, listens, and
/// does nothing else, until its standard input closes (the parent closed it, or died). It prints `ready` once
/// started.
enum ListenNode {
    static let command = "listen-node"

    static func run(url: String, arguments: [String]) async throws -> Never {
        guard arguments.count == 2, let source = ["triggers": ChangeCaptureSource.triggers, "logical": .logicalDecoding][arguments[0]]
        else {
            FileHandle.standardError.write(Data("usage: skyros-bench listen-node triggers|logical SCHEMA\n".utf8))
            exit(2)
        }
        let parentDone = ObserverNode.watchParent()
        var configuration = DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: url), schema: arguments[1]), entities: [CostCounter.self, CostEvent.self],
            pool: .init(maximumConnections: 2))
        configuration.changeFeed.captureSource = source
        let stack = try await DataStack.start(configuration, logger: benchmarkLogger)
        let ready = Array("ready\n".utf8)
        ready.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
        for await _ in parentDone {}
        await stack.shutdown()
        exit(0)
    }
}

/// `cost_counters`: the rows pgbench's one-row UPDATEs change.
struct CostCounter: Entity {
    var id: Int64
    var n: Int64
    static let tableName = "cost_counters"
    static let columns: [EntityColumn<CostCounter>] = [EntityColumn(\.id, "id"), EntityColumn(\.n, "n")]
}

/// `cost_events`: the table pgbench's one-row INSERTs append to (its key from a sequence).
struct CostEvent: Entity {
    var id: Int64
    var payload: String
    static let tableName = "cost_events"
    static let columns: [EntityColumn<CostEvent>] = [EntityColumn(\.id, "id"), EntityColumn(\.payload, "payload")]
}

import SkyrosStore

/// Orders one save's changes so that every statement finds the rows its foreign keys name: a row is written
/// after the rows it refers to that the same save creates, and a row is deleted after the changes that stop
/// referring to it. A ticket and its comments saved in one `write {}` commit whatever order the app made them
/// in, as Core Data orders a save.
///
/// The order moves as little as it can: a change moves only past the changes it must follow, and everything
/// else keeps the save's order (a delete and an insert that reuse a unique value stay in the order they were
/// made). A `delete(where:)` or `update(where:)` stays where it was made, and no row moves across it. Rows
/// that refer to one another in a cycle (an employee and their manager, inserted together) keep their order:
/// PostgreSQL checks a multi-row insert's keys at the end of the statement, and a cycle across statements needs
/// a deferrable constraint.
enum ForeignKeyOrder {
    /// `slots` in an order that satisfies their foreign keys; `slots` itself when no table of the save refers
    /// to a table of the save (the common case costs one set of table names).
    static func ordered(_ slots: [ResolvedSlot]) -> [ResolvedSlot] {
        guard slots.count > 1, Self.mayDepend(slots) else { return slots }
        var result: [ResolvedSlot] = []
        result.reserveCapacity(slots.count)
        var segment: [PendingRow] = []
        for slot in slots {
            switch slot {
            case .row(let row):
                segment.append(row)
            case .setWrite:
                result.append(contentsOf: Self.ordered(rows: segment).map { .row($0) })
                segment.removeAll()
                result.append(slot)
            }
        }
        result.append(contentsOf: Self.ordered(rows: segment).map { .row($0) })
        return result
    }

    /// Whether a table written by `slots` has a foreign key to a table written by `slots` (itself included).
    private static func mayDepend(_ slots: [ResolvedSlot]) -> Bool {
        var tables = Set<String>()
        var parents = Set<String>()
        var lastKind: ObjectIdentifier?
        for case .row(let row) in slots {
            // Consecutive rows are mostly of one entity type: its table and parents are known already.
            let kind = ObjectIdentifier(type(of: row.kind))
            if kind == lastKind { continue }
            lastKind = kind
            tables.insert(row.key.table)
            parents.formUnion(row.kind.referencedTables)
        }
        return !tables.isDisjoint(with: parents)
    }

    /// The rows of one segment (between two set writes) in dependency order.
    static func ordered(rows: [PendingRow]) -> [PendingRow] {
        guard rows.count > 1 else { return rows }
        var graph = DependencyGraph(count: rows.count)
        // Rows this segment creates, and rows it deletes, by key; deletes by table.
        var created: [RowKey: Int] = [:]
        var deleted: [RowKey: Int] = [:]
        var deletesByTable: [String: [Int]] = [:]
        for (index, row) in rows.enumerated() {
            switch row.state {
            case .inserted, .upserted: created[row.key] = index
            case .deleted(_, let emit) where emit:
                deleted[row.key] = index
                deletesByTable[row.key.table, default: []].append(index)
            case .updated, .deleted: break
            }
        }
        // One gate per table that loses rows: every delete of a referring row passes it before any of the
        // table's own deletes (its rows' referrers are unknown: a delete carries no value).
        var gates: [String: Int] = [:]
        for (index, row) in rows.enumerated() {
            // Written after the rows it refers to that this segment creates.
            if let value = row.value {
                for key in row.kind.referencedKeys(of: value) {
                    if let creator = created[key], creator != index { graph.edge(from: creator, to: index) }
                }
            }
            switch row.state {
            case .updated(_, let original, _):
                // An update that stops referring to a row this segment deletes goes before that delete.
                for key in row.kind.referencedKeys(of: original) {
                    if let deleter = deleted[key], deleter != index { graph.edge(from: index, to: deleter) }
                }
            case .deleted(_, let emit) where emit:
                // A deleted row goes before the deletes of the rows of other tables it may refer to. A table's
                // rows referring to its own rows keep their order (the cycle rule above).
                for parent in row.kind.referencedTables where parent != row.key.table {
                    guard let parentDeletes = deletesByTable[parent] else { continue }
                    let gate: Int
                    if let existing = gates[parent] {
                        gate = existing
                    } else {
                        gate = graph.addGate()
                        gates[parent] = gate
                        for deleter in parentDeletes { graph.edge(from: gate, to: deleter) }
                    }
                    graph.edge(from: index, to: gate)
                }
            case .inserted, .upserted, .deleted: break
            }
        }
        guard graph.hasEdges else { return rows }
        return graph.stableOrder().map { rows[$0] }
    }
}

/// The "goes before" relation among a segment's rows, plus gates (nodes that order groups of rows without
/// being rows), ordered by a stable topological sort.
struct DependencyGraph {
    /// Nodes `0..<rowCount` are rows, in save order; nodes from `rowCount` on are gates.
    let rowCount: Int
    private var successors: [[Int]]
    private var predecessorCount: [Int]
    private(set) var hasEdges = false

    init(count: Int) {
        self.rowCount = count
        self.successors = Array(repeating: [], count: count)
        self.predecessorCount = Array(repeating: 0, count: count)
    }

    /// Adds a gate node and returns it.
    mutating func addGate() -> Int {
        self.successors.append([])
        self.predecessorCount.append(0)
        return self.successors.count - 1
    }

    /// `from` goes before `to`.
    mutating func edge(from: Int, to: Int) {
        self.successors[from].append(to)
        self.predecessorCount[to] += 1
        self.hasEdges = true
    }

    /// The rows in an order where each follows its predecessors, taking at each step the earliest row (in save
    /// order) that may go; inside a cycle, the earliest row of the cycle goes first.
    func stableOrder() -> [Int] {
        var remaining = self.predecessorCount
        var done = Array(repeating: false, count: remaining.count)
        var ready = MinHeap()
        var order: [Int] = []
        order.reserveCapacity(self.rowCount)
        var gates: [Int] = []
        for node in remaining.indices where remaining[node] == 0 {
            if node < self.rowCount { ready.push(node) } else { gates.append(node) }
        }
        var earliest = 0   // the earliest row not yet placed: the one a cycle gives way to
        func place(_ node: Int) {
            done[node] = true
            if node < self.rowCount { order.append(node) }
            for next in self.successors[node] {
                remaining[next] -= 1
                if remaining[next] == 0, !done[next] {
                    if next < self.rowCount { ready.push(next) } else { gates.append(next) }
                }
            }
        }
        while order.count < self.rowCount {
            if let gate = gates.popLast() {
                if !done[gate] { place(gate) }
                continue
            }
            if let node = ready.pop() {
                if !done[node] { place(node) }
                continue
            }
            // A cycle: every remaining row waits on another. The earliest goes.
            while done[earliest] { earliest += 1 }
            place(earliest)
        }
        return order
    }
}

/// A binary min-heap of node numbers.
private struct MinHeap {
    private var items: [Int] = []

    mutating func push(_ value: Int) {
        self.items.append(value)
        var child = self.items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.items[child] < self.items[parent] else { break }
            self.items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Int? {
        guard let first = self.items.first else { return nil }
        let last = self.items.removeLast()
        if self.items.isEmpty { return first }
        self.items[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < self.items.count, self.items[left] < self.items[smallest] { smallest = left }
            if right < self.items.count, self.items[right] < self.items[smallest] { smallest = right }
            if smallest == parent { break }
            self.items.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }
}

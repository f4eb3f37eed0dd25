import Dispatch
import SkyrosStore

/// The main context's identity map: committed rows keyed by (table, id) with their versions, bounded by a
/// row count and/or an approximate byte size, evicting the least recently used clean row first.
///
/// Rows with changes still queued for commit are pinned: they leave the LRU list and are never evicted
/// (the bound can be exceeded by pinned rows only). The stack knows which rows have queued changes (its
/// pending map) and says so — ``pin(_:)`` when a row gets its first one, ``unpin(_:)`` when it loses its last,
/// `pinned:` when it caches a row that still has some — so the cache keeps no second map of them (that map
/// was three more lookups in a large table per queued write). All operations are O(1) (amortised), on a
/// dictionary and a doubly linked list threaded through an array of slots.
struct RowCache: Sendable {
    struct Entry: Sendable {
        var key: RowKey
        var value: any Entity
        var version: Int64
        var bytes: Int
        /// When it was cached (uptime nanoseconds; 0 unless ``CacheLimit/maxAge`` is set).
        var cachedAt: UInt64 = 0
        var previous = -1
        var next = -1
        var linked = false
    }

    let limit: CacheLimit
    private var slots: [Entry?] = []
    private var free: [Int] = []
    private var index: [RowKey: Int] = [:]
    /// Most recently used.
    private var head = -1
    /// Least recently used.
    private var tail = -1
    private(set) var totalBytes = 0
    private(set) var hits = 0
    private(set) var misses = 0
    private(set) var evictions = 0

    /// ``CacheLimit/maxAge`` in nanoseconds.
    private let maxAgeNanoseconds: UInt64?

    init(limit: CacheLimit) {
        self.limit = limit
        self.maxAgeNanoseconds = limit.maxAge.map { age in
            UInt64(max(0, age.components.seconds)) * 1_000_000_000 + UInt64(max(0, age.components.attoseconds / 1_000_000_000))
        }
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    var count: Int { self.index.count }

    /// The cached row, marked most recently used.
    mutating func get(_ key: RowKey) -> Entry? {
        guard let slot = self.index[key], let entry = self.slots[slot] else {
            self.misses += 1
            return nil
        }
        if let maxAge = self.maxAgeNanoseconds, entry.linked, Self.now() &- entry.cachedAt > maxAge {
            // Older than the bound (a clean row: rows with queued changes are never dropped): read again.
            self.remove(key)
            self.misses += 1
            return nil
        }
        self.hits += 1
        if entry.linked {
            self.unlink(slot)
            self.linkAtHead(slot)
        }
        return entry
    }

    /// The cached row, without touching it (no hit or miss counted, no change in LRU order).
    func peek(_ key: RowKey) -> Entry? { self.index[key].flatMap { self.slots[$0] } }

    /// Whether the key is cached, without touching it.
    func contains(_ key: RowKey) -> Bool { self.index[key] != nil }

    /// The cached version, without touching the row.
    func version(_ key: RowKey) -> Int64? { self.index[key].flatMap { self.slots[$0]?.version } }

    /// Inserts or replaces a row, marks it most recently used and evicts down to the bound. `pinned`: the row
    /// has queued changes (a new entry stays off the LRU list; an existing one keeps its state).
    mutating func put(_ key: RowKey, value: any Entity, version: Int64, bytes: Int, pinned: Bool = false) {
        if let slot = self.index[key], let old = self.slots[slot]?.bytes {
            self.totalBytes += bytes - old
            self.slots[slot]!.value = value
            self.slots[slot]!.version = version
            self.slots[slot]!.bytes = bytes
            if self.maxAgeNanoseconds != nil { self.slots[slot]!.cachedAt = Self.now() }
            if self.slots[slot]!.linked {
                self.unlink(slot)
                self.linkAtHead(slot)
            }
        } else {
            let entry = Entry(
                key: key, value: value, version: version, bytes: bytes, cachedAt: self.maxAgeNanoseconds == nil ? 0 : Self.now())
            let slot: Int
            if let reused = self.free.popLast() {
                slot = reused
                self.slots[slot] = entry
            } else {
                slot = self.slots.count
                self.slots.append(entry)
            }
            self.index[key] = slot
            self.totalBytes += bytes
            if !pinned { self.linkAtHead(slot) }
        }
        self.evict()
    }

    mutating func remove(_ key: RowKey) {
        guard let slot = self.index.removeValue(forKey: key), let bytes = self.slots[slot]?.bytes else { return }
        self.unlink(slot)
        self.totalBytes -= bytes
        self.slots[slot] = nil
        self.free.append(slot)
    }

    mutating func removeAll() {
        self = RowCache(limit: self.limit)
    }

    /// Removes every cached row of `table`.
    mutating func removeAll(inTable table: String) {
        for key in self.index.keys where key.table == table { self.remove(key) }
    }

    /// The row got its first queued change: it is never evicted until ``unpin(_:)``.
    mutating func pin(_ key: RowKey) {
        if let slot = self.index[key], self.slots[slot]?.linked == true { self.unlink(slot) }
    }

    /// The row's last queued change is done: it can be evicted again.
    mutating func unpin(_ key: RowKey) {
        if let slot = self.index[key], self.slots[slot]?.linked == false { self.linkAtHead(slot) }
        self.evict()
    }

    /// Whether a cached row is pinned.
    func isPinned(_ key: RowKey) -> Bool { self.index[key].map { self.slots[$0]?.linked == false } ?? false }

    private func overLimit() -> Bool {
        if let maxRows = self.limit.maxRows, self.index.count > maxRows { return true }
        if let maxBytes = self.limit.maxBytes, self.totalBytes > maxBytes { return true }
        return false
    }

    private mutating func evict() {
        while self.overLimit(), self.tail >= 0, let key = self.slots[self.tail]?.key {
            self.remove(key)
            self.evictions += 1
        }
    }

    // The list is threaded through the slots in place (`slots[i]!.field = …`): copying an entry out and back
    // would retain and release its key and value on every move.

    private mutating func unlink(_ slot: Int) {
        guard self.slots[slot]?.linked == true, let previous = self.slots[slot]?.previous, let next = self.slots[slot]?.next
        else { return }
        if previous >= 0 { self.slots[previous]!.next = next } else { self.head = next }
        if next >= 0 { self.slots[next]!.previous = previous } else { self.tail = previous }
        self.slots[slot]!.previous = -1
        self.slots[slot]!.next = -1
        self.slots[slot]!.linked = false
    }

    private mutating func linkAtHead(_ slot: Int) {
        guard self.slots[slot]?.linked == false else { return }
        self.slots[slot]!.previous = -1
        self.slots[slot]!.next = self.head
        self.slots[slot]!.linked = true
        if self.head >= 0 { self.slots[self.head]!.previous = slot }
        self.head = slot
        if self.tail < 0 { self.tail = slot }
    }
}

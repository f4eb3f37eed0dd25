/// The main context's identity map: committed rows keyed by (table, id) with their versions, bounded by a
/// row count and/or an approximate byte size, evicting the least recently used clean row first.
///
/// Rows with changes still queued for commit are pinned: they leave the LRU list and are never evicted
/// (the bound can be exceeded by pinned rows only). All operations are O(1) (amortised), on a dictionary
/// and a doubly linked list threaded through an array of slots.
struct RowCache: Sendable {
    struct Entry: Sendable {
        var key: RowKey
        var value: any Entity
        var version: Int64
        var bytes: Int
        var previous = -1
        var next = -1
        var linked = false
    }

    let limit: CacheLimit
    private var slots: [Entry?] = []
    private var free: [Int] = []
    private var index: [RowKey: Int] = [:]
    /// Pending-change counts of pinned keys (a pinned key need not be cached).
    private var pins: [RowKey: Int] = [:]
    /// Most recently used.
    private var head = -1
    /// Least recently used.
    private var tail = -1
    private(set) var totalBytes = 0
    private(set) var hits = 0
    private(set) var misses = 0
    private(set) var evictions = 0

    init(limit: CacheLimit) { self.limit = limit }

    var count: Int { self.index.count }

    /// The cached row, marked most recently used.
    mutating func get(_ key: RowKey) -> Entry? {
        guard let slot = self.index[key], let entry = self.slots[slot] else {
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

    /// Whether the key is cached, without touching it.
    func contains(_ key: RowKey) -> Bool { self.index[key] != nil }

    /// The cached version, without touching the row.
    func version(_ key: RowKey) -> Int64? { self.index[key].flatMap { self.slots[$0]?.version } }

    /// Inserts or replaces a row, marks it most recently used and evicts down to the bound.
    mutating func put(_ key: RowKey, value: any Entity, version: Int64, bytes: Int) {
        if let slot = self.index[key], var entry = self.slots[slot] {
            self.totalBytes += bytes - entry.bytes
            entry.value = value
            entry.version = version
            entry.bytes = bytes
            self.slots[slot] = entry
            if entry.linked {
                self.unlink(slot)
                self.linkAtHead(slot)
            }
        } else {
            let entry = Entry(key: key, value: value, version: version, bytes: bytes)
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
            if self.pins[key] == nil { self.linkAtHead(slot) }
        }
        self.evict()
    }

    mutating func remove(_ key: RowKey) {
        guard let slot = self.index.removeValue(forKey: key), let entry = self.slots[slot] else { return }
        if entry.linked { self.unlink(slot) }
        self.totalBytes -= entry.bytes
        self.slots[slot] = nil
        self.free.append(slot)
    }

    mutating func removeAll() {
        self = RowCache(limit: self.limit)
    }

    /// Marks a key as having one more queued change: it is never evicted until unpinned.
    mutating func pin(_ key: RowKey) {
        self.pins[key, default: 0] += 1
        if let slot = self.index[key], self.slots[slot]?.linked == true { self.unlink(slot) }
    }

    mutating func unpin(_ key: RowKey) {
        guard let pin = self.pins.index(forKey: key) else { return }
        if self.pins.values[pin] > 1 {
            self.pins.values[pin] -= 1
            return
        }
        self.pins.remove(at: pin)
        if let slot = self.index[key], self.slots[slot]?.linked == false { self.linkAtHead(slot) }
        self.evict()
    }

    func isPinned(_ key: RowKey) -> Bool { self.pins[key] != nil }

    private func overLimit() -> Bool {
        if let maxRows = self.limit.maxRows, self.index.count > maxRows { return true }
        if let maxBytes = self.limit.maxBytes, self.totalBytes > maxBytes { return true }
        return false
    }

    private mutating func evict() {
        while self.overLimit(), self.tail >= 0, let entry = self.slots[self.tail] {
            self.remove(entry.key)
            self.evictions += 1
        }
    }

    private mutating func unlink(_ slot: Int) {
        guard var entry = self.slots[slot], entry.linked else { return }
        if entry.previous >= 0 { self.slots[entry.previous]!.next = entry.next } else { self.head = entry.next }
        if entry.next >= 0 { self.slots[entry.next]!.previous = entry.previous } else { self.tail = entry.previous }
        entry.previous = -1
        entry.next = -1
        entry.linked = false
        self.slots[slot] = entry
    }

    private mutating func linkAtHead(_ slot: Int) {
        guard var entry = self.slots[slot], !entry.linked else { return }
        entry.previous = -1
        entry.next = self.head
        entry.linked = true
        self.slots[slot] = entry
        if self.head >= 0 { self.slots[self.head]!.previous = slot }
        self.head = slot
        if self.tail < 0 { self.tail = slot }
    }
}

import Foundation
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import SkyrosPostgres
import Testing

/// The change cursor on its own: out-of-commit-order positions, the re-read window, pruning gaps, hints.
@Suite struct ChangeCursorTests {
    private static let origin = UUID()

    private static func entry(_ position: Int64, xid: UInt64) -> ChangeLogEntry {
        ChangeLogEntry(position: position, xid: String(xid), origin: Self.origin, changes: [])
    }

    @Test func theCursorDeliversEachEntryOnceAndKeepsAWindowAboveTheHorizon() {
        var cursor = ChangeCursor()
        #expect(cursor.advance(entries: [Self.entry(2, xid: 101)], xmin: "100", prunedThrough: "0") == .entries([Self.entry(2, xid: 101)]))
        // Position 1 (xid 100) commits after position 2: the re-read window (xid >= 100) still holds it.
        #expect(cursor.horizonText == "100")
        let next = cursor.advance(entries: [Self.entry(1, xid: 100), Self.entry(2, xid: 101)], xmin: "102", prunedThrough: "0")
        #expect(next == .entries([Self.entry(1, xid: 100)]))
        // Both transactions are now below the horizon: later reads (xid >= 102) never return them again.
        #expect(cursor.horizonText == "102")
        #expect(!cursor.hasDelivered(1) && !cursor.hasDelivered(2))
        #expect(cursor.advance(entries: [Self.entry(3, xid: 102)], xmin: "102", prunedThrough: "0") == .entries([Self.entry(3, xid: 102)]))
        #expect(cursor.advance(entries: [Self.entry(3, xid: 102)], xmin: "102", prunedThrough: "0") == .entries([]))
        // A watermark that rises to the horizon means unseen entries may be gone.
        #expect(cursor.advance(entries: [], xmin: "103", prunedThrough: "102") == .gap)
        #expect(cursor.advance(entries: [], xmin: "104", prunedThrough: "102") == .entries([]))
        // A new log (the store was destroyed and rebuilt): a gap, then normal delivery from the new log.
        let first = UUID()
        let second = UUID()
        #expect(cursor.advance(entries: [], xmin: "104", prunedThrough: "102", logID: first) == .entries([]))
        #expect(cursor.advance(entries: [Self.entry(1, xid: 104)], xmin: "105", prunedThrough: "0", logID: second) == .gap)
        #expect(cursor.advance(entries: [Self.entry(1, xid: 104), Self.entry(2, xid: 105)], xmin: "105", prunedThrough: "0", logID: second)
            == .entries([Self.entry(2, xid: 105)]))
        // The server's transaction ids went back (a standby promoted without the last commits): a gap, then
        // normal delivery from the lower ids.
        #expect(cursor.advance(entries: [Self.entry(7, xid: 90)], xmin: "90", prunedThrough: "0", logID: second) == .gap)
        #expect(cursor.horizonText == "90")
        let hinted = cursor.deliverFromHint(position: 8, xid: "91")
        #expect(hinted)
        #expect(cursor.advance(entries: [Self.entry(7, xid: 90), Self.entry(8, xid: 91), Self.entry(9, xid: 92)], xmin: "92",
                               prunedThrough: "0", logID: second) == .entries([Self.entry(9, xid: 92)]))
    }

    /// The next read covers only what the last read's snapshot had not seen finish: transactions at or above its
    /// `xmax`, and those it saw in progress.
    @Test func theCursorReadsAgainOnlyTheTransactionsItsLastSnapshotSawRunningOrNotYetStarted() {
        var cursor = ChangeCursor()
        #expect(cursor.window == ChangeCursor.Window(from: nil, running: []))
        // Snapshot: 100 and 103 in progress, nothing from 105 on started.
        #expect(cursor.advance(entries: [Self.entry(1, xid: 101)], xmin: "100", xmax: "105", running: ["103", "100"], prunedThrough: "0")
            == .entries([Self.entry(1, xid: 101)]))
        #expect(cursor.window == ChangeCursor.Window(from: "105", running: ["100", "103"]))
        #expect(cursor.horizonText == "100")
        // Hints: 102 had finished (the read saw its entry, if any); 103 was running and 106 had not started.
        let hints = [(2, "102"), (3, "103"), (4, "106"), (4, "106")].map { cursor.deliverFromHint(position: $0, xid: $1) }
        #expect(hints == [false, true, true, false])
        // The next read returns 100's entry (it committed meanwhile) with the two the hints delivered.
        let next = cursor.advance(
            entries: [Self.entry(5, xid: 100), Self.entry(3, xid: 103), Self.entry(4, xid: 106)], xmin: "104", xmax: "108",
            running: ["104"], prunedThrough: "0")
        #expect(next == .entries([Self.entry(5, xid: 100)]))
        #expect(cursor.window == ChangeCursor.Window(from: "108", running: ["104"]))
        // What that snapshot saw finish is forgotten: nothing is remembered for transactions no read returns again.
        #expect(!cursor.hasDelivered(3) && !cursor.hasDelivered(4) && !cursor.hasDelivered(5))
        // A hint for a transaction still running at the last read stays remembered across it.
        let running = cursor.deliverFromHint(position: 6, xid: "104")
        #expect(running)
        #expect(cursor.advance(entries: [], xmin: "104", xmax: "109", running: ["104"], prunedThrough: "0") == .entries([]))
        #expect(cursor.hasDelivered(6))
        #expect(cursor.advance(entries: [Self.entry(6, xid: 104)], xmin: "109", xmax: "109", prunedThrough: "0") == .entries([]))
        #expect(!cursor.hasDelivered(6))
    }
}

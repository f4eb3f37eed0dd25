import Foundation
@testable import Skyros
@testable import SkyrosObservation
@testable import SkyrosStack
@testable import SkyrosStore
@testable import SkyrosSync
import Testing

@Suite("UUID.random and commit ids")
struct UUIDRandomTests {
    @Test func versionFourRFC4122AndDistinct() {
        let ids = (0..<10_000).map { _ in UUID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(100) {
            let text = id.uuidString
            #expect(Array(text)[14] == "4")                       // version
            #expect("89AB".contains(Array(text)[19]))               // variant
            #expect(UUID(uuidString: text) == id)
        }
    }

    @Test func commitIDsSortInSequenceOrderAndCarryTheirSequence() {
        let prefix = UUID.commitPrefix()
        let sequences: [UInt64] = Array(1...2_000) + [1 << 40, (1 << 62) - 1]
        let ids = sequences.map { UUID(commitPrefix: prefix, sequence: $0) }
        #expect(Set(ids).count == ids.count)
        #expect(ids.map(\.commitSequence) == sequences)
        // PostgreSQL compares uuids byte by byte: a stack's ids sort in its queue order.
        let bytes = ids.map { id in withUnsafeBytes(of: id.uuid) { Array($0) } }
        #expect(bytes == bytes.sorted { $0.lexicographicallyPrecedes($1) })
        // Another stack's prefix: the first 8 bytes (version nibble included) differ, the sequence is the same.
        let other = UUID(commitPrefix: UUID.commitPrefix(), sequence: 1)
        #expect(other.uuidString.prefix(18) != ids[0].uuidString.prefix(18))
        #expect(other.commitSequence == 1)
        for id in ids.prefix(100) + [other] {
            let text = id.uuidString
            #expect(Array(text)[14] == "8")                       // version 8 (RFC 9562, custom layout)
            #expect("89AB".contains(Array(text)[19]))               // variant
        }
    }
}

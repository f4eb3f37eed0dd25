import Foundation
import SkyrosStore
import Testing

/// Commit ids: a stack's prefix and a sequence number in an RFC 9562 version 8 UUID, ordered as PostgreSQL
/// compares `uuid`s (byte by byte) in the order the stack queued its writes.
@Suite struct CommitIDTests {
    @Test func aCommitIDKeepsItsSequenceAndSortsInQueueOrder() {
        let prefix: UInt64 = 0x0123_4567_89AB_CDEF
        let sequences: [UInt64] = [0, 1, 2, 255, 256, 65_535, 1 << 40, (1 << 62) - 1]
        let ids = sequences.map { UUID(commitPrefix: prefix, sequence: $0) }
        #expect(ids.map(\.commitSequence) == sequences)
        for id in ids {
            let text = id.uuidString.lowercased()
            #expect(text.hasPrefix("01234567-89ab-8def-"), "\(text)")            // the prefix, version 8
            #expect(["8", "9", "a", "b"].contains(text.dropFirst(19).prefix(1)), "\(text)")    // RFC 9562 variant
        }
        // Hex text compares as the bytes do.
        let texts = ids.map { $0.uuidString.lowercased() }
        #expect(texts == texts.sorted())
    }
}

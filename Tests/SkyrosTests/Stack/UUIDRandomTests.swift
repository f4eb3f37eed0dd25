import Foundation
@testable import Skyros
import Testing

@Suite("UUID.random and UUID.commitID")
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

    @Test func commitIDsAreVersionEightAndDistinctAcrossThreads() async {
        let ids = await withTaskGroup(of: [UUID].self) { group in
            for _ in 0..<8 { group.addTask { (0..<5_000).map { _ in UUID.commitID() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(ids.count == 40_000)
        #expect(Set(ids).count == ids.count)
        // One process prefix: the first 8 bytes (version nibble included) are shared.
        #expect(Set(ids.map { $0.uuidString.prefix(18) }).count == 1)
        for id in ids.prefix(100) {
            let text = id.uuidString
            #expect(Array(text)[14] == "8")                       // version 8 (RFC 9562, custom layout)
            #expect("89AB".contains(Array(text)[19]))               // variant
        }
    }
}

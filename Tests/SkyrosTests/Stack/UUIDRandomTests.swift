import Foundation
@testable import Skyros
import Testing

@Suite("UUID.random")
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
}

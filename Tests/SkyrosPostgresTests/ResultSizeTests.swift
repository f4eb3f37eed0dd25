import SkyrosPostgres
import Testing

/// A result of 2 GiB or more of values fails with `.resultTooLarge` instead of trapping: cells store their offsets
/// as `Int32`. (Checked before anything is copied; a test that allocates 2 GiB is not worth its cost.)
@Suite("Result size limit")
struct ResultSizeTests {
    @Test func resultsUpToTheLimitAreAcceptedAndLargerOnesFailClearly() throws {
        #expect(PGRows.maximumStorageSize == Int(Int32.max))
        try PGRows.checkStorageSize(0)
        try PGRows.checkStorageSize(Int(Int32.max))
        for size in [Int(Int32.max) + 1, 3 << 30, Int.max] {
            let error = #expect(throws: PGError.self) { try PGRows.checkStorageSize(size) }
            #expect(error?.kind == .resultTooLarge)
            #expect(error?.message.contains("fetch it in parts") == true)
        }
    }
}

import Foundation
import Skyros
import Testing
import Vapor
@testable import VaporTicketsApp

/// The status and JSON code each error becomes (server-free: the errors are built here).
@Suite struct ErrorResponsesTests {
    struct Unexpected: Error {}

    @Test func statusAndCodeForEachError() {
        let conflict = StoreError.versionConflict(entity: "Ticket", id: "1", expected: 1, actual: 2)
        let cases: [(any Error, HTTPResponseStatus, String)] = [
            (conflict, .conflict, "version_conflict"),
            // A durable write's commit error arrives wrapped: the wrapped error decides.
            (DataStackError(code: .commitFailed, message: "commit failed", underlying: conflict), .conflict, "version_conflict"),
            (DataStackError(code: .storeUnreachable, message: "down"), .serviceUnavailable, "store_unreachable"),
            (DataStackError(code: .stackShutDown, message: "stopping"), .serviceUnavailable, "shutting_down"),
            (Abort(.notFound, reason: "no ticket"), .notFound, "http_404"),
            (Unexpected(), .internalServerError, "internal"),
        ]
        for (error, status, code) in cases {
            let (gotStatus, gotCode, message) = ErrorResponses.classify(error)
            #expect(gotStatus == status, "\(error)")
            #expect(gotCode == code, "\(error)")
            #expect(!message.isEmpty)
        }
    }

    @Test func aFiveHundredSaysNothingOfTheError() {
        struct Secret: Error, CustomStringConvertible { var description: String { "password=hunter2" } }
        let (status, _, message) = ErrorResponses.classify(Secret())
        #expect(status == .internalServerError)
        #expect(message == "internal error")
    }
}

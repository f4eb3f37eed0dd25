import Foundation
import Skyros
import Testing
import Vapor
@testable import VaporTicketsApp

/// The status and body each error becomes (server-free: the errors are built here).
@Suite struct ErrorResponsesTests {
    struct Unexpected: Error {}

    @Test func statusAndBodyForEachError() {
        let conflict = StoreError.versionConflict(entity: "Ticket", id: "1", expected: 1, actual: 2)
        let duplicate = PGError(kind: .uniqueViolation, message: "duplicate key", constraint: "tickets_title_key")
        let cases: [(any Error, HTTPResponseStatus, Bool?)] = [
            (conflict, .conflict, nil),
            // A durable write's commit error arrives wrapped: the wrapped error decides.
            (DataStackError(code: .commitFailed, message: "commit failed", underlying: conflict), .conflict, nil),
            (DataStackError(code: .commitFailed, message: "commit failed", underlying: duplicate), .conflict, nil),
            (DataStackError(code: .storeUnreachable, message: "down"), .serviceUnavailable, nil),
            (DataStackError(code: .stackShutDown, message: "stopping"), .serviceUnavailable, nil),
            (DataStackError(code: .deadlineExceeded, message: "late", mayStillCommit: true), .serviceUnavailable, true),
            (DataStackError(code: .deadlineExceeded, message: "late", mayStillCommit: false), .serviceUnavailable, false),
            (DataStackError(code: .writeCancelled, message: "cancelled", mayStillCommit: true), .serviceUnavailable, true),
            (PGError(kind: .poolTimeout, message: "no connection"), .serviceUnavailable, nil),
            (Abort(.notFound, reason: "no such ticket"), .notFound, nil),
            (Abort(.payloadTooLarge), .payloadTooLarge, nil),
            (Unexpected(), .internalServerError, nil),
        ]
        for (error, status, mayStillCommit) in cases {
            let failure = ErrorResponses.classify(error)
            #expect(failure.status == status, "\(error)")
            #expect(failure.body.error)
            #expect(failure.body.mayStillCommit == mayStillCommit, "\(error)")
            #expect(!failure.body.reason.isEmpty)
        }
        #expect(ErrorResponses.classify(duplicate).body.reason == "a ticket with this title exists")
    }

    @Test func aFiveHundredSaysNothingOfTheError() {
        struct Secret: Error, CustomStringConvertible { var description: String { "password=hunter2" } }
        let failure = ErrorResponses.classify(Secret())
        #expect(failure.status == .internalServerError)
        #expect(failure.body == ErrorBody(reason: "internal error"))
    }

    @Test func theBodyIsVaporsShape() throws {
        let json = try JSONEncoder().encode(ErrorBody(reason: "no such ticket"))
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        #expect(object["error"] as? Bool == true)
        #expect(object["reason"] as? String == "no such ticket")
        #expect(object.count == 2)   // mayStillCommit only when known
    }
}

import Foundation
import Skyros
import Vapor

/// The JSON body of every error: Vapor's own shape (`ErrorMiddleware`), `{"error": true, "reason": "…"}`, with
/// `mayStillCommit` when a write ended at its deadline (`true`: it was queued and may still commit, so read
/// the ticket before retrying; `false`: nothing was saved). The reason never holds a value the client sent,
/// a row value or SQL.
public struct ErrorBody: Content, Equatable {
    public var error: Bool
    public var reason: String
    public var mayStillCommit: Bool?

    public init(reason: String, mayStillCommit: Bool? = nil) {
        self.error = true
        self.reason = reason
        self.mayStillCommit = mayStillCommit
    }
}

/// Turns every error a route throws into a status and an ``ErrorBody``, so that a client never gets an empty
/// 500:
/// - 400 for a value refused at the door (``ColumnValueError``: it names the column, never the value) and for
///   a body that is not valid JSON for the route; 413 for a body over the limit (`Abort` from Vapor);
/// - 404, 412, 428 and other `AbortError`s keep their status;
/// - 409 for a version conflict (another writer changed the row since it was read) or a duplicate title;
/// - 503 with `Retry-After` when the database is unreachable (connection failed or lost, pool exhausted), a
///   write did not finish by its deadline (`DataStackConfiguration.writeTimeout`) or the stack is shutting
///   down;
/// - 500 otherwise, with a generic reason (details go to the log, not to the client).
struct ErrorResponses: AsyncMiddleware {
    /// A status and the body that goes with it.
    struct Failure: Equatable {
        var status: HTTPResponseStatus
        var body: ErrorBody
    }

    /// The `Retry-After` of a 503, in seconds.
    static let retryAfter = "2"

    func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        do {
            return try await next.respond(to: request)
        } catch {
            let failure = Self.classify(error)
            if failure.status == .internalServerError {
                request.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            let response = Response(status: failure.status)
            try response.content.encode(failure.body, as: .json)
            if failure.status == .serviceUnavailable { response.headers.replaceOrAdd(name: .retryAfter, value: Self.retryAfter) }
            return response
        }
    }

    static func classify(_ error: any Error) -> Failure {
        func failure(_ status: HTTPResponseStatus, _ reason: String, mayStillCommit: Bool? = nil) -> Failure {
            Failure(status: status, body: ErrorBody(reason: reason, mayStillCommit: mayStillCommit))
        }
        let unreachable = failure(.serviceUnavailable, "the database is unreachable; try again shortly")
        switch error {
        case let refused as ColumnValueError:
            return failure(.badRequest, refused.description)
        case is DecodingError:
            return failure(.badRequest, "the request body is not valid JSON for this route")
        case let abort as any AbortError:
            return failure(abort.status, abort.reason)
        case StoreError.versionConflict:
            return failure(.conflict, "the ticket was changed by another writer; read it again and retry")
        case StoreError.notFound:
            return failure(.notFound, "no such ticket")
        case let stack as DataStackError:
            switch stack.code {
            case .deadlineExceeded, .writeCancelled:
                let reason = stack.mayStillCommit
                    ? "the database did not confirm the write in time; it is queued and may still commit"
                    : "the database did not confirm the write in time; nothing was saved"
                return failure(.serviceUnavailable, reason, mayStillCommit: stack.mayStillCommit)
            case .storeUnreachable: return unreachable
            case .stackShutDown: return failure(.serviceUnavailable, "the service is shutting down")
            default: if let underlying = stack.underlying { return self.classify(underlying) }
            }
        case let postgres as PGError:
            switch postgres.kind {
            case .uniqueViolation:
                return failure(.conflict, postgres.constraint == "tickets_title_key" ? "a ticket with this title exists" : "a row with this key exists")
            case .connectionFailed, .connectionLost, .connectionClosed, .poolTimeout, .poolClosed:
                return unreachable
            default: break
            }
        default: break
        }
        return failure(.internalServerError, "internal error")
    }
}

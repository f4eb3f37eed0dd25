import Foundation
import Hummingbird
import Skyros

/// The JSON body of every error, the same shape as the Vapor example's (Vapor's `ErrorMiddleware`):
/// `{"error": true, "reason": "…"}`, with `mayStillCommit` when a write ended at its deadline (`true`: it was
/// queued and may still commit, so read the ticket before retrying; `false`: nothing was saved). The reason
/// never holds a value the client sent, a row value or SQL.
struct ErrorBody: Codable, Equatable {
    var error = true
    var reason: String
    var mayStillCommit: Bool?
}

/// A request body that is not valid JSON for its route. Hummingbird's own decoding errors quote the body, so
/// the routes replace them with this one (400, a fixed reason).
struct InvalidBody: Error {}

/// Turns every error a route throws into a status and an ``ErrorBody``, so that a client never gets an empty
/// 500:
/// - 400 for a value refused at the door (``ColumnValueError``: it names the column, never the value) and for
///   a body that is not valid JSON for the route; 413 for a body over the request context's upload limit;
/// - 404, 412, 428 and other `HTTPError`s keep their status;
/// - 409 for a version conflict (another writer changed the row since it was read) or a duplicate title;
/// - 503 with `Retry-After` before the stack started, when the database cannot be reached (connection failed
///   or lost, pool exhausted) and when a write did not finish by its deadline (`WRITE_TIMEOUT_MS`);
/// - 500 otherwise, with a generic reason (details go to the log, not to the client).
struct ErrorResponses<Context: RequestContext>: RouterMiddleware {
    /// The `Retry-After` of a 503, in seconds.
    static var retryAfter: String { "2" }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let (status, body) = Self.classify(error)
            if status == .internalServerError {
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            var response = Self.json(status: status, body)
            if status == .serviceUnavailable { response.headers[.retryAfter] = Self.retryAfter }
            return response
        }
    }

    static func classify(_ error: any Error) -> (HTTPResponse.Status, ErrorBody) {
        let unreachable = (HTTPResponse.Status.serviceUnavailable, ErrorBody(reason: "the database is unreachable; try again shortly"))
        switch error {
        case let refused as ColumnValueError:
            return (.badRequest, ErrorBody(reason: refused.description))
        case is ServiceNotReady:
            return (.serviceUnavailable, ErrorBody(reason: "the service is starting; try again shortly"))
        case is InvalidBody, is DecodingError:
            return (.badRequest, ErrorBody(reason: "the request body is not valid JSON for this route"))
        case let http as HTTPError:
            return (http.status, ErrorBody(reason: http.body ?? http.status.reasonPhrase))
        case let http as any HTTPResponseError:   // NIOTooManyBytesError: 413 over the upload limit
            return (http.status, ErrorBody(reason: http.status.reasonPhrase))
        case StoreError.versionConflict:
            return (.conflict, ErrorBody(reason: "the ticket was changed by another writer; read it again and retry"))
        case StoreError.notFound:
            return (.notFound, ErrorBody(reason: "no such ticket"))
        case let stack as DataStackError:
            switch stack.code {
            case .deadlineExceeded, .writeCancelled:
                let reason = stack.mayStillCommit
                    ? "the database did not confirm the write in time; it is queued and may still commit"
                    : "the database did not confirm the write in time; nothing was saved"
                return (.serviceUnavailable, ErrorBody(reason: reason, mayStillCommit: stack.mayStillCommit))
            case .storeUnreachable: return unreachable
            case .stackShutDown: return (.serviceUnavailable, ErrorBody(reason: "the service is shutting down"))
            default: if let underlying = stack.underlying { return self.classify(underlying) }
            }
        case let postgres as PGError:
            switch postgres.kind {
            case .uniqueViolation:
                let reason = postgres.constraint == "tickets_title_key" ? "a ticket with this title exists" : "a row with this key exists"
                return (.conflict, ErrorBody(reason: reason))
            case .connectionFailed, .connectionLost, .connectionClosed, .poolTimeout, .poolClosed:
                return unreachable
            default: break
            }
        default: break
        }
        return (.internalServerError, ErrorBody(reason: "internal error"))
    }

    /// A response whose body is `value` as JSON.
    static func json(status: HTTPResponse.Status, _ value: some Encodable) -> Response {
        let body = (try? JSONEncoder().encode(value)) ?? Data(#"{"error":true,"reason":"internal error"}"#.utf8)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

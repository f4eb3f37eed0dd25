import Foundation
import Skyros
import Vapor

/// Turns every error a route throws into a status and a JSON body (`{"error": "...", "message": "..."}`), so
/// that a client never gets an empty 500:
/// - 400 for a value refused at the door (``ColumnValueError``: it names the column, never the value) and for
///   a body that does not decode;
/// - 404 and other `AbortError`s keep their status;
/// - 409 for a version conflict (another writer changed the row since it was read) or a duplicate key;
/// - 503 when the database cannot be reached (connection failed or lost, pool exhausted) or the stack is
///   shutting down;
/// - 500 otherwise, with a generic message (details go to the log, not to the client).
struct ErrorResponses: AsyncMiddleware {
    func respond(to request: Request, chainingTo next: any AsyncResponder) async throws -> Response {
        do {
            return try await next.respond(to: request)
        } catch {
            let (status, code, message) = Self.classify(error)
            if status == .internalServerError {
                request.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            let response = Response(status: status)
            try response.content.encode(["error": code, "message": message], as: .json)
            return response
        }
    }

    static func classify(_ error: any Error) -> (HTTPResponseStatus, String, String) {
        switch error {
        case let refused as ColumnValueError:
            return (.badRequest, "invalid_value", refused.description)
        case is DecodingError:
            return (.badRequest, "invalid_body", "the request body is not valid JSON for this route")
        case let abort as any AbortError:
            return (abort.status, "http_\(abort.status.code)", abort.reason)
        case StoreError.versionConflict:
            return (.conflict, "version_conflict", "the row was changed by another writer; read it again and retry")
        case let stack as DataStackError:
            if stack.code == .storeUnreachable { return (.serviceUnavailable, "store_unreachable", "the database is unreachable") }
            if stack.code == .stackShutDown { return (.serviceUnavailable, "shutting_down", "the service is shutting down") }
            if let underlying = stack.underlying { return self.classify(underlying) }
        case let postgres as PGError:
            switch postgres.kind {
            case .uniqueViolation: return (.conflict, "conflict", "a row with this key exists")
            case .connectionFailed, .connectionLost, .connectionClosed, .poolTimeout, .poolClosed:
                return (.serviceUnavailable, "store_unreachable", "the database is unreachable")
            default: break
            }
        default: break
        }
        return (.internalServerError, "internal", "internal error")
    }
}

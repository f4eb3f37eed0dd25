import Foundation
import Hummingbird
import Skyros

/// Turns every error a route throws into a status and a JSON body (`{"error": "...", "message": "..."}`), so
/// that a client never gets an empty 500:
/// - 400 for a value refused at the door (``ColumnValueError``: it names the column, never the value) and for
///   a body that does not decode;
/// - 404 and other `HTTPError`s keep their status;
/// - 409 for a version conflict (another writer changed the row since it was read) or a duplicate key;
/// - 503 before the stack started, and when the database cannot be reached (connection failed or lost, pool exhausted);
/// - 500 otherwise, with a generic message (details go to the log, not to the client).
struct ErrorResponses<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let (status, code, message) = Self.classify(error)
            if status == .internalServerError {
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            return Self.json(status: status, code: code, message: message)
        }
    }

    static func classify(_ error: any Error) -> (HTTPResponse.Status, String, String) {
        switch error {
        case let refused as ColumnValueError:
            return (.badRequest, "invalid_value", refused.description)
        case is ServiceNotReady:
            return (.serviceUnavailable, "starting", "the service is starting; try again shortly")
        case is DecodingError:
            return (.badRequest, "invalid_body", "the request body is not valid JSON for this route")
        case let http as HTTPError:
            return (http.status, "http_\(http.status.code)", http.body ?? http.status.reasonPhrase)
        case StoreError.versionConflict:
            return (.conflict, "version_conflict", "the row was changed by another writer; read it again and retry")
        case let stack as DataStackError:
            if stack.code == .storeUnreachable { return (.serviceUnavailable, "store_unreachable", "the database is unreachable") }
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

    static func json(status: HTTPResponse.Status, code: String, message: String) -> Response {
        self.json(status: status, ["error": code, "message": message])
    }

    /// A response whose body is `fields` as a JSON object.
    static func json(status: HTTPResponse.Status, _ fields: [String: String]) -> Response {
        let body = (try? JSONEncoder().encode(fields)) ?? Data(#"{"error":"internal"}"#.utf8)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Gives every request an id and logs one line per request.
///
/// - The id is the request's `X-Request-ID` when it is well-formed (1 to 128 characters among letters,
///   digits and `-_.:`; anything else could forge log lines or headers), else a new UUID. The response echoes
///   it in `X-Request-ID`.
/// - The request's logger (`context.logger`) carries it as `hb.request.id`, the key Hummingbird's own
///   records and `context.id` use: every line a handler logs names its request.
/// - One line per request at `info` (`/health` at `debug`: probes every few seconds would drown the rest):
///   method, path, status, duration. For an event stream the line is written when the stream starts.
struct RequestLogging<Context: RequestContext>: RouterMiddleware {
    static var header: HTTPField.Name { HTTPField.Name("X-Request-ID")! }

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let id = request.headers[Self.header].flatMap(Self.wellFormed) ?? UUID().uuidString.lowercased()
        var context = context
        context.logger[metadataKey: "hb.request.id"] = .string(id)
        let started = ContinuousClock.now
        let level: Logger.Level = request.uri.path == "/health" ? .debug : .info
        do {
            var response = try await next(request, context)
            response.headers[Self.header] = id
            self.log(request, status: response.status, since: started, level: level, logger: context.logger)
            return response
        } catch {
            // Only what `ErrorResponses` did not turn into a response reaches here.
            let status = (error as? HTTPError)?.status ?? .internalServerError
            self.log(request, status: status, since: started, level: level, logger: context.logger)
            throw error
        }
    }

    /// `value` when it may be used as a request id.
    static func wellFormed(_ value: String) -> String? {
        guard (1...128).contains(value.utf8.count),
            value.utf8.allSatisfy({ byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                    || byte == UInt8(ascii: ":")
            })
        else { return nil }
        return value
    }

    private func log(_ request: Request, status: HTTPResponse.Status, since started: ContinuousClock.Instant, level: Logger.Level, logger: Logger) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        logger.log(
            level: level, "\(request.method) \(request.uri.path) \(status.code)",
            metadata: ["http.duration_ms": "\(String(format: "%.1f", milliseconds))"])
    }
}

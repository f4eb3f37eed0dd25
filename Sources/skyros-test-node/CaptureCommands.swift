import Foundation
import Skyros
import SkyrosTestFixtures
import SkyrosPostgres

/// The capture tests' node: a stack whose main context and observers the test questions while psql (a
/// writer outside Skyros) changes the tables.
///
/// `capture-node --schema S --watch-book ID [--source logical]` (reads `DATABASE_URL`) starts a stack on `S` with the capture
/// entities, observes a fetch of every `CaptureBook` sorted by id and the book `ID`, and caches every book.
/// Once both observers gave their first result it prints `ready <listener application_name>`, then answers
/// each command read from stdin with one line on stdout:
///
///     object <id>   →  object <id> <title>  |  object <id> nil         (the main context's cached read)
///     query         →  query <count> <id:title,…>                       (a main-context fetch of all books)
///     observed      →  observed <count> <id:title,…> | book <title|nil> (the observers' latest results)
///     stats         →  stats catchUps=<n> flushes=<n> remoteEntries=<n>
///     quit          →  shuts the stack down and exits 0 (so does the end of stdin)
///
/// An empty list prints as `-`; titles are percent-encoded outside `[A-Za-z0-9._~-]`. A command that fails
/// answers `<command> error <error>`.
enum CaptureCommands {
    /// Runs `command` if it is one of these; `nil` otherwise.
    static func run(_ command: String, _ arguments: [String]) async throws -> Int32? {
        switch command {
        case "capture-node": return try await self.node(Options(arguments))
        default: return nil
        }
    }

    private static func node(_ options: Options) async throws -> Int32 {
        guard let url = ProcessInfo.processInfo.environment["DATABASE_URL"] else { throw NodeError("DATABASE_URL is not set") }
        var configuration = DataStackConfiguration(
            store: .postgres(try PGConfiguration(url: url), schema: options["schema"]),
            entities: [CaptureAuthor.self, CaptureBook.self, CaptureAudit.self])
        configuration.pool.leaseTimeout = .seconds(30)
        if options["source"] == "logical" { configuration.changeFeed.captureSource = .logicalDecoding }
        let stack = try await DataStack.start(configuration)
        let watched = Int64(options["watch-book"]) ?? 0
        let all = FetchDescriptor<CaptureBook>(sortBy: [SortDescriptor(\CaptureBook.id)])
        let latest = LatestObserved()
        let queryObserver = Task {
            do {
                for try await result in stack.observe(all) { await latest.setBooks(result.values) }
            } catch {
                say("observer ended: \(error)")
            }
        }
        let bookObserver = Task {
            do {
                for try await book in stack.observe(CaptureBook.self, id: watched) { await latest.setBook(book) }
            } catch {
                say("observer ended: \(error)")
            }
        }
        // Every book in the main context's cache, so that `object` answers from memory.
        _ = try await stack.mainContext.fetch(all)
        let end = ContinuousClock.now + .seconds(30)
        while await !latest.bothDelivered {
            guard ContinuousClock.now < end else { throw NodeError("the observers gave no first result within 30 s") }
            try await Task.sleep(for: .milliseconds(10))
        }
        say("ready \(stack.changeFeedApplicationName ?? "")")

        commands: for await line in self.standardInputLines() {
            let words = line.split(separator: " ").map(String.init)
            guard let command = words.first else { continue }
            do {
                switch command {
                case "object":
                    guard words.count == 2, let id = Int64(words[1]) else { throw NodeError("usage: object <id>") }
                    let book = try await stack.mainContext.object(CaptureBook.self, id: id)
                    say("object \(id) \(book.map { self.escaped($0.title) } ?? "nil")")
                case "query":
                    say("query \(self.rendered(try await stack.mainContext.fetch(all)))")
                case "observed":
                    let (books, book) = await latest.snapshot
                    say("observed \(self.rendered(books)) | book \(book.map { self.escaped($0.title) } ?? "nil")")
                case "stats":
                    let statistics = stack.changeFeedStatistics
                    say("stats catchUps=\(statistics.catchUps) flushes=\(statistics.flushes) remoteEntries=\(statistics.remoteEntries)")
                case "quit":
                    break commands
                default:
                    throw NodeError("unknown command")
                }
            } catch {
                say("\(command) error \(error)")
            }
        }
        queryObserver.cancel()
        bookObserver.cancel()
        await stack.shutdown()
        return 0
    }

    /// The lines of stdin, read on a thread of its own (a blocking read must not hold a pool thread).
    private static func standardInputLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            Thread.detachNewThread {
                while let line = readLine() { continuation.yield(line) }
                continuation.finish()
            }
        }
    }

    /// `<count> <id:title,…>`, or `<count> -` for no books.
    private static func rendered(_ books: [CaptureBook]) -> String {
        let list = books.map { "\($0.id):\(self.escaped($0.title))" }.joined(separator: ",")
        return "\(books.count) \(list.isEmpty ? "-" : list)"
    }

    /// The title with every character outside `[A-Za-z0-9._~-]` percent-encoded (no separator survives).
    private static func escaped(_ title: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "._~-")
        return title.addingPercentEncoding(withAllowedCharacters: allowed) ?? title
    }
}

/// The latest result each observer yielded.
actor LatestObserved {
    private var books: [CaptureBook]?
    private var book: CaptureBook??

    func setBooks(_ books: [CaptureBook]) { self.books = books }
    func setBook(_ book: CaptureBook?) { self.book = .some(book) }

    var bothDelivered: Bool { self.books != nil && self.book != nil }
    var snapshot: (books: [CaptureBook], book: CaptureBook?) { (self.books ?? [], self.book ?? nil) }
}

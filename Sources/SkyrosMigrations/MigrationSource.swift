import Foundation

/// Where a ``SchemaMigrator`` finds its migrations: a directory of `.sql` files, a resource directory bundled with
/// a target, or migrations built in code.
///
/// ```swift
/// let fromDisk = MigrationSource.directory(URL(fileURLWithPath: "migrations"))
/// let bundled = MigrationSource.bundle(.module, subdirectory: "migrations")  // resources: [.copy("migrations")]
/// let inCode = MigrationSource.migrations([try SchemaMigration(version: 1, description: "init", up: "CREATE …;")])
/// ```
public struct MigrationSource: Sendable, CustomStringConvertible {
    private enum Storage: Sendable {
        case directory(URL)
        case missingBundleResource(String)
        case migrations([SchemaMigration])
    }
    private let storage: Storage

    /// The `.sql` files directly inside `url` (not recursive; hidden files and other extensions are ignored).
    public static func directory(_ url: URL) -> MigrationSource { MigrationSource(storage: .directory(url)) }

    /// The `.sql` files in the directory at `path` (relative paths are resolved against the working directory).
    public static func directory(path: String) -> MigrationSource {
        .directory(URL(fileURLWithPath: path))
    }

    /// A resource directory copied into `bundle` (SwiftPM: `resources: [.copy("migrations")]`).
    public static func bundle(_ bundle: Bundle, subdirectory: String = "migrations") -> MigrationSource {
        if let url = bundle.url(forResource: subdirectory, withExtension: nil) {
            return .directory(url)
        }
        return MigrationSource(storage: .missingBundleResource("\(bundle.bundlePath)/\(subdirectory)"))
    }

    /// Migrations built in code.
    public static func migrations(_ migrations: [SchemaMigration]) -> MigrationSource {
        MigrationSource(storage: .migrations(migrations))
    }

    /// The directory, if this source reads one.
    public var directoryURL: URL? {
        if case .directory(let url) = self.storage { return url }
        return nil
    }

    public var description: String {
        switch self.storage {
        case .directory(let url): return url.path
        case .missingBundleResource(let path): return path
        case .migrations(let list): return "\(list.count) migrations built in code"
        }
    }

    /// Loads and parses every migration, sorted by version.
    /// - Throws: ``MigrationError`` (``MigrationError/Kind/sourceNotFound``, ``MigrationError/Kind/unreadableFile``,
    ///   ``MigrationError/Kind/invalidFileName``, ``MigrationError/Kind/invalidFile``,
    ///   ``MigrationError/Kind/duplicateVersion``), naming the file.
    public func load() throws -> [SchemaMigration] {
        let migrations: [SchemaMigration]
        switch self.storage {
        case .missingBundleResource(let path):
            throw MigrationError(kind: .sourceNotFound, message: "the migrations resource \(path) does not exist")
        case .migrations(let list):
            migrations = list
        case .directory(let url):
            migrations = try Self.loadDirectory(url)
        }
        let sorted = migrations.sorted { $0.version < $1.version }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw MigrationError(
                kind: .duplicateVersion,
                message: "version \(next.version) is also used by \(previous.fileName)",
                fileName: next.fileName, version: next.version)
        }
        return sorted
    }

    private static func loadDirectory(_ url: URL) throws -> [SchemaMigration] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError(
                kind: .sourceNotFound, message: "the migrations directory \(url.path) does not exist")
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw MigrationError(kind: .sourceNotFound, message: "cannot list \(url.path): \(error.localizedDescription)")
        }
        return try names.filter { $0.hasSuffix(".sql") && !$0.hasPrefix(".") }.sorted().map { name in
            let fileURL = url.appendingPathComponent(name)
            let data: Data
            do {
                data = try Data(contentsOf: fileURL)
            } catch {
                throw MigrationError(
                    kind: .unreadableFile, message: "cannot read the file: \(error.localizedDescription)",
                    fileName: name)
            }
            guard let text = String(data: data, encoding: .utf8) else {
                throw MigrationError(kind: .unreadableFile, message: "the file is not valid UTF-8", fileName: name)
            }
            return try SchemaMigration(fileName: name, contents: text)
        }
    }
}

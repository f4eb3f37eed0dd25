/// The release of Skyros these libraries and tools belong to.
///
/// `migrate --version` prints it; a service can log or report it:
///
/// ```swift
/// logger.info("starting", metadata: ["skyros.version": "\(SkyrosVersion.current)"])
/// ```
public enum SkyrosVersion {
    /// The version, in semantic-versioning form (`major.minor.patch`).
    public static let current = "0.1.0"
}

// `import Skyros` is enough: the client's types (PostgresConfiguration, PostgresError, the value conformances an
// entity's columns need) come with it, as one module does for a Core Data or GRDB user.
@_exported import SkyrosPostgres

// `import Skyros` is enough: the stack's layers (entities and stores, contexts, observation, the change feed)
// and the client's types an entity's columns need (PostgresConfiguration, PostgresError, the value
// conformances) come with it, as one module does for a Core Data or GRDB user.
@_exported import SkyrosPostgres
@_exported import SkyrosStore
@_exported import SkyrosStack
@_exported import SkyrosObservation
@_exported import SkyrosSync

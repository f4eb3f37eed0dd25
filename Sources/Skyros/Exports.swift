// `import Skyros` is enough for the stack: its layers (entities and stores, contexts, observation, the change
// feed) and, of the client, only what the stack's API takes or throws: the configuration, the pool's
// configuration, the error and its SQLSTATE, and the value protocols an entity's columns conform to. The
// client's query API (`PGConnection`, `PGQuery`, `PGRows`, `PGListener`, …) comes with `import SkyrosPostgres`,
// so a target that also imports PostgresNIO sees each of its names once.
@_exported import struct SkyrosPostgres.PGConfiguration
@_exported import class SkyrosPostgres.PGConnectionPool
@_exported import struct SkyrosPostgres.PGError
@_exported import struct SkyrosPostgres.SQLState
@_exported import struct SkyrosPostgres.PGValue
@_exported import struct SkyrosPostgres.PGType
@_exported import protocol SkyrosPostgres.PGEncodable
@_exported import protocol SkyrosPostgres.PGDecodable
@_exported import typealias SkyrosPostgres.PGCodable
@_exported import protocol SkyrosPostgres.PGArrayElement
@_exported import struct SkyrosPostgres.PGJSON
@_exported import struct SkyrosPostgres.PGJSONB
@_exported import SkyrosStore
@_exported import SkyrosStack
@_exported import SkyrosObservation
@_exported import SkyrosSync

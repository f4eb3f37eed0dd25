// `import Skyros` is enough for the stack: its layers (entities and stores, contexts, observation, the change
// feed) and, of the client, only what the stack's API takes or throws: the configuration, the pool's
// configuration, the error and its SQLSTATE, the value protocols an entity's columns conform to, and the statement
// type raw SQL takes. The rest of the client's query API (`PGConnection`, `PGRows`, `PGListener`, …) comes with
// `import SkyrosPostgres`,
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
// What raw SQL and interactive transactions take: the statement (values bound by interpolation) and the
// isolation level. PostgresNIO names neither.
@_exported import struct SkyrosPostgres.PGQuery
@_exported import enum SkyrosPostgres.IsolationLevel
@_exported import SkyrosStore
@_exported import SkyrosStack
@_exported import SkyrosObservation
@_exported import SkyrosSync

// The test targets use the shipped test kit (a schema per test, `eventually`, the log recorder, the stack double)
// through this target, which adds only what is particular to this package's own suite (the server under test and
// its restarts, child processes, the swift-testing form of `eventually`).
@_exported import SkyrosTesting

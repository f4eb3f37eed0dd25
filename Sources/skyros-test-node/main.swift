// A helper executable used only by the test suite: it runs a stack in a separate OS process so tests can
// exercise several processes against one database, SIGKILL, and SIGTERM.
//
//   skyros-test-node <command> [arguments…]     (DATABASE_URL must be set)
//
// Each command lives in a file of its own and reports its outcome on stdout, one line per event, so the
// test can parse it. Exit status: 0 success, 1 failure, 2 unknown command.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    FileHandle.standardError.write(Data("usage: skyros-test-node <command> [arguments…]\n".utf8))
    exit(2)
}
let rest = Array(arguments.dropFirst())
// Output lines are printed with `print`, flushed at exit; commands that must report before being killed
// write with FileHandle.standardOutput (unbuffered).

do {
    if let status = try await CommitQueueCommands.run(command, rest) { exit(status) }
    if let status = try await ManyProcessCommands.run(command, rest) { exit(status) }
    if let status = try await CaptureCommands.run(command, rest) { exit(status) }
} catch {
    say("error \(String(reflecting: error))")
    exit(1)
}
FileHandle.standardError.write(Data("skyros-test-node: unknown command \(command)\n".utf8))
exit(2)

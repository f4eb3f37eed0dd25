// Prelude of the docs' code blocks (scripts/check-snippets): the `Bundle.module` SwiftPM generates for a target
// with resources (a snippet's target has none).
import Foundation

extension Bundle {
    static var module: Bundle { fatalError() }
}

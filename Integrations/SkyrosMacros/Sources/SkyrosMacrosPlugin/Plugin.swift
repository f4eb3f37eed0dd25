import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plug-in of SkyrosMacros: `@Entity`, `@Column`, `@Transient`.
@main
struct SkyrosMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [EntityMacro.self, ColumnMacro.self, TransientMacro.self]
}

import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plug-in of SkyrosMacros: `@Entity`, `@Column`, `@Transient`, `@Related`.
@main
struct SkyrosMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [EntityMacro.self, ColumnMacro.self, TransientMacro.self, RelatedMacro.self]
}

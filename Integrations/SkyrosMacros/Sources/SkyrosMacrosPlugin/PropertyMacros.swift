import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Column`: a marker read by `@Entity`. It generates nothing; it diagnoses what is wrong on its property (a
/// computed or static property, a name that is not a string literal, `@Transient` beside it).
public struct ColumnMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self) else { return [] }
        let removeAttribute = FixIt.removing(node, named: "@Column", from: variable)
        for property in EntityProperty.all(in: variable) {
            if variable.modifiers.contains(where: { $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class) }) {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.columnOnStatic(property: property.name), fixIts: [removeAttribute]))
            } else if !property.isStored {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.columnOnComputed(property: property.name), fixIts: [removeAttribute]))
            } else if property.transient != nil {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.columnAndTransient(property: property.name), fixIts: [removeAttribute]))
            }
            let arguments = ColumnArguments(node)
            if property.isStored, property.isLet, let generated = arguments.generated,
                generated.trimmedDescription.hasPrefix(".identity")
            {
                let fixIt = FixIt(
                    message: EntityNote(message: "Replace 'let' with 'var'"),
                    changes: [.replace(oldNode: Syntax(variable.bindingSpecifier), newNode: Syntax(variable.bindingSpecifier.with(\.tokenKind, .keyword(.var))))])
                context.diagnose(Diagnostic(node: variable.bindingSpecifier, message: EntityDiagnostic.identityOnLet(property: property.name), fixIts: [fixIt]))
            }
            if let expression = arguments.nonLiteralName {
                context.diagnose(Diagnostic(node: expression, message: EntityDiagnostic.columnNameNotALiteral(property: property.name)))
            } else if arguments.name?.isEmpty == true {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.emptyColumnName(property: property.name)))
            }
        }
        return []
    }
}

/// `@Transient`: a marker read by `@Entity`. It generates nothing; it diagnoses a property with no initial value
/// (decoding a fetched row could not set it) and one that is not stored.
public struct TransientMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self) else { return [] }
        for property in EntityProperty.all(in: variable) {
            if !property.isStored {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.transientOnComputed(property: property.name)))
            } else if !property.hasInitialValue {
                context.diagnose(Diagnostic(node: property.node, message: EntityDiagnostic.transientWithoutValue(property: property.name)))
            }
        }
        return []
    }
}

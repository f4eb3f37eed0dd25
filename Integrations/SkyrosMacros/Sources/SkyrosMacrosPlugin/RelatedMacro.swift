import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxMacros

/// `@Related`: a marker read by `@Entity`, which lists the relationship in `relationships`. It generates nothing;
/// it diagnoses what does not fit its property: an argument of the other kind of relationship (`deleteRule:` on a
/// to-many, `inverse:` on a to-one), `.setNull` on a reference that cannot be `NULL`, a to-many without its
/// inverse, a property that is neither a `Reference` nor a `ToMany`.
public struct RelatedMacro: PeerMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self) else { return [] }
        let arguments = RelatedArguments(node)
        let removeAttribute = FixIt.removing(node, named: "@Related", from: variable)
        for property in EntityProperty.all(in: variable) {
            if property.isStatic {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.relatedOnStatic(property: property.name), fixIts: [removeAttribute]))
                continue
            }
            if property.transient != nil {
                context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.relatedAndTransient(property: property.name), fixIts: [removeAttribute]))
                continue
            }
            switch property.relationship {
            case nil:
                context.diagnose(
                    Diagnostic(
                        node: node, message: EntityDiagnostic.relatedOnOtherType(property: property.name, type: property.type?.trimmedDescription),
                        fixIts: [removeAttribute]))

            case .toOne(let target, let optional):
                if !property.isStored {
                    context.diagnose(
                        Diagnostic(node: node, message: EntityDiagnostic.relatedOnComputedReference(property: property.name), fixIts: [removeAttribute]))
                }
                if let inverse = arguments.inverse {
                    context.diagnose(
                        Diagnostic(
                            node: inverse, message: EntityDiagnostic.inverseOnToOne(property: property.name, target: target),
                            fixIts: [Self.removing(inverse, from: node, label: "inverse")]))
                }
                if let rule = arguments.deleteRule, rule.expression.isSetNull, !optional {
                    var fixIts: [FixIt] = []
                    if let type = property.binding.typeAnnotation?.type {
                        let optionalType = TypeSyntax(OptionalTypeSyntax(wrappedType: type.trimmed))
                            .with(\.leadingTrivia, type.leadingTrivia).with(\.trailingTrivia, type.trailingTrivia)
                        fixIts.append(
                            FixIt(
                                message: EntityNote(message: "Make '\(property.name)' optional"),
                                changes: [.replace(oldNode: Syntax(type), newNode: Syntax(optionalType))]))
                    }
                    context.diagnose(
                        Diagnostic(
                            node: rule.expression, message: EntityDiagnostic.setNullOnNonOptional(property: property.name, target: target),
                            fixIts: fixIts))
                }

            case .toMany(let target):
                if let rule = arguments.deleteRule {
                    context.diagnose(
                        Diagnostic(
                            node: rule, message: EntityDiagnostic.deleteRuleOnToMany(property: property.name, target: target),
                            fixIts: [Self.removing(rule, from: node, label: "deleteRule")]))
                } else if arguments.inverse == nil {
                    context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.toManyWithoutInverse(property: property.name, target: target)))
                }
                if let inverse = arguments.inverse, let root = inverse.expression.keyPathRoot,
                    root.lastComponent != target.lastComponent
                {
                    context.diagnose(
                        Diagnostic(
                            node: inverse.expression,
                            message: EntityDiagnostic.inverseOfAnotherEntity(property: property.name, target: target, root: root)))
                }
            // A stored ToMany is diagnosed by @Entity, which leaves it out of the columns.
            }
        }
        return []
    }

    /// The fix-it removing one argument from the attribute (and the parentheses with the last one).
    private static func removing(_ argument: LabeledExprSyntax, from attribute: AttributeSyntax, label: String) -> FixIt {
        var fixed = attribute
        if case .argumentList(let list) = attribute.arguments {
            var kept = list.filter { $0.id != argument.id }.map { $0 }
            if kept.isEmpty {
                fixed = attribute.with(\.leftParen, nil).with(\.arguments, nil).with(\.rightParen, nil)
                    .with(\.trailingTrivia, attribute.trailingTrivia)
            } else {
                kept[kept.count - 1] = kept[kept.count - 1].with(\.trailingComma, nil)
                fixed = attribute.with(\.arguments, .argumentList(LabeledExprListSyntax(kept)))
            }
        }
        return FixIt(
            message: EntityNote(message: "Remove '\(label):'"),
            changes: [.replace(oldNode: Syntax(attribute), newNode: Syntax(fixed))])
    }
}

/// The arguments of a `@Related(…)`: the to-one's `deleteRule:` and the to-many's `inverse:`. A later kind of
/// relationship (a many-to-many's `through:`) is one more label read here.
struct RelatedArguments {
    var deleteRule: LabeledExprSyntax?
    var inverse: LabeledExprSyntax?

    init(_ attribute: AttributeSyntax?) {
        guard case .argumentList(let arguments) = attribute?.arguments else { return }
        for argument in arguments {
            switch argument.label?.text {
            case "deleteRule": self.deleteRule = argument
            case "inverse": self.inverse = argument
            default: continue
            }
        }
    }
}

extension ExprSyntax {
    /// `.setNull` or `DeleteRule.setNull` (qualified or not).
    var isSetNull: Bool {
        guard let member = self.as(MemberAccessExprSyntax.self), member.declName.baseName.text == "setNull" else { return false }
        guard let base = member.base else { return true }
        return base.trimmedDescription.split(separator: ".").last == "DeleteRule"
    }

    /// The root type of a key path written with one (`\Book.author` → `Book`), else `nil`.
    var keyPathRoot: String? {
        self.as(KeyPathExprSyntax.self)?.root?.trimmedDescription
    }
}

extension String {
    /// `Library.Book` → `Book`; `Book` → `Book`.
    var lastComponent: Substring {
        self.split(separator: ".").last ?? Substring(self)
    }
}

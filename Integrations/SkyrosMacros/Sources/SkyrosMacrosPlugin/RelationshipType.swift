import SwiftSyntax

/// What a property's declared type says about a relationship: a `Reference<Target>` (a to-one, a foreign-key
/// column), optional or not, or a `ToMany<Target>` (a to-many). Read from the syntax alone, as a macro must: the
/// type as written (`Reference<Author>`, `Reference<Author>?`, `Optional<Skyros.Reference<Author>>`), else the
/// initial value's type (`= ToMany<Book>()`).
enum RelationshipType {
    /// `Reference<Target>` or its optional.
    case toOne(target: String, optional: Bool)
    /// `ToMany<Target>`.
    case toMany(target: String)

    /// The modules a qualified name may start with (`Skyros.Reference<Author>`).
    private static let modules: Set<String> = ["Skyros", "SkyrosStore", "SkyrosMacros"]

    /// The relationship a type declares, or `nil` for any other type.
    init?(_ type: TypeSyntax) {
        var type = type
        var optional = false
        while true {
            if let wrapped = type.as(OptionalTypeSyntax.self)?.wrappedType {
                type = wrapped
            } else if let wrapped = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self)?.wrappedType {
                type = wrapped
            } else if let argument = Self.genericArgument(of: type, named: "Optional", modules: ["Swift"]) {
                guard let wrapped = TypeSyntax(argument) else { return nil }
                type = wrapped
            } else {
                break
            }
            optional = true
        }
        if let target = Self.genericArgument(of: type, named: "Reference", modules: Self.modules) {
            self = .toOne(target: target.trimmedDescription, optional: optional)
        } else if !optional, let target = Self.genericArgument(of: type, named: "ToMany", modules: Self.modules) {
            self = .toMany(target: target.trimmedDescription)
        } else {
            return nil
        }
    }

    /// The relationship an initial value's type declares: `Reference<Author>(7)`, `ToMany<Book>()`.
    init?(initialValue: ExprSyntax) {
        guard let call = initialValue.as(FunctionCallExprSyntax.self),
            let specialized = call.calledExpression.as(GenericSpecializationExprSyntax.self),
            specialized.genericArgumentClause.arguments.count == 1,
            let argument = specialized.genericArgumentClause.arguments.first
        else { return nil }
        let name: String? =
            if let reference = specialized.expression.as(DeclReferenceExprSyntax.self) {
                reference.baseName.text
            } else if let member = specialized.expression.as(MemberAccessExprSyntax.self),
                let base = member.base?.as(DeclReferenceExprSyntax.self), Self.modules.contains(base.baseName.text)
            {
                member.declName.baseName.text
            } else {
                nil
            }
        switch name {
        case "Reference": self = .toOne(target: argument.argument.trimmedDescription, optional: false)
        case "ToMany": self = .toMany(target: argument.argument.trimmedDescription)
        default: return nil
        }
    }

    /// The single generic argument of `Name<Argument>` or `Module.Name<Argument>`.
    private static func genericArgument(of type: TypeSyntax, named name: String, modules: Set<String>) -> GenericArgumentSyntax.Argument? {
        let clause: GenericArgumentClauseSyntax?
        if let simple = type.as(IdentifierTypeSyntax.self), simple.name.text == name {
            clause = simple.genericArgumentClause
        } else if let member = type.as(MemberTypeSyntax.self), member.name.text == name,
            let base = member.baseType.as(IdentifierTypeSyntax.self), modules.contains(base.name.text)
        {
            clause = member.genericArgumentClause
        } else {
            return nil
        }
        guard let arguments = clause?.arguments, arguments.count == 1 else { return nil }
        return arguments.first?.argument
    }
}

extension TypeSyntax {
    /// The type of a generic argument written as a type (`Reference<Author>`'s `Author`).
    init?(_ argument: GenericArgumentSyntax.Argument) {
        switch argument {
        case .type(let type): self = type
        default: return nil
        }
    }
}

import SwiftDiagnostics
import SwiftSyntax

/// One property of an `@Entity` struct as the macros see it: a column, a transient stored property, or a property
/// that is not stored (computed, static).
struct EntityProperty {
    /// The name as written, backticks included (for the key path and `CodingKeys`).
    let spelling: String
    /// The name without backticks.
    let name: String
    /// The node diagnostics point at.
    let node: Syntax
    /// `@Column`, when present.
    let column: AttributeSyntax?
    /// `@Transient`, when present.
    let transient: AttributeSyntax?
    /// `@Related`, when present.
    let related: AttributeSyntax?
    /// A `Reference` or `ToMany` property, from its declared type (or its initial value's).
    let relationship: RelationshipType?
    /// The declared type, when written.
    let type: TypeSyntax?
    /// The property's binding (`books: ToMany<Book>`), which a fix-it rewrites.
    let binding: PatternBindingSyntax
    /// `static` or `class`.
    let isStatic: Bool
    /// A stored instance property (not computed, not static).
    let isStored: Bool
    /// The binding has an initial value (`= …`).
    let hasInitialValue: Bool
    /// `let` rather than `var`.
    let isLet: Bool

    /// The properties a struct's member block declares, in order (`var a, b: Int` gives two).
    static func all(in members: MemberBlockItemListSyntax) -> [EntityProperty] {
        members.flatMap { member in member.decl.as(VariableDeclSyntax.self).map(Self.all(in:)) ?? [] }
    }

    /// The properties one declaration declares (`var a, b: Int` gives two).
    static func all(in variable: VariableDeclSyntax) -> [EntityProperty] {
        var properties: [EntityProperty] = []
        let isStatic = variable.modifiers.contains { $0.name.tokenKind == .keyword(.static) || $0.name.tokenKind == .keyword(.class) }
        let column = variable.attributes.attribute(named: "Column")
        let transient = variable.attributes.attribute(named: "Transient")
        let related = variable.attributes.attribute(named: "Related")
        let bindings = Array(variable.bindings)
        for (index, binding) in bindings.enumerated() {
            guard let identifier = binding.pattern.as(IdentifierPatternSyntax.self)?.identifier else { continue }
            // `var a, b: Int`: `a` has the type of the next binding that declares one.
            let type =
                binding.typeAnnotation?.type
                ?? (binding.initializer == nil
                    ? bindings[(index + 1)...].lazy.compactMap { $0.typeAnnotation?.type }.first : nil)
            let relationship = type.flatMap(RelationshipType.init) ?? binding.initializer.flatMap { RelationshipType(initialValue: $0.value) }
            properties.append(
                EntityProperty(
                    spelling: identifier.text,
                    name: identifier.text.trimmingBackticks,
                    node: Syntax(binding.pattern),
                    column: column,
                    transient: transient,
                    related: related,
                    relationship: relationship,
                    type: type,
                    binding: binding,
                    isStatic: isStatic,
                    isStored: !isStatic && !binding.isComputed,
                    hasInitialValue: binding.initializer != nil,
                    isLet: variable.bindingSpecifier.tokenKind == .keyword(.let)
                ))
        }
        return properties
    }
}

extension PatternBindingSyntax {
    /// A getter (`{ … }` or `get { … }`), as opposed to none or only observers (`willSet`/`didSet`).
    var isComputed: Bool {
        switch self.accessorBlock?.accessors {
        case nil: return false
        case .getter: return true
        case .accessors(let accessors):
            return accessors.contains { accessor in
                switch accessor.accessorSpecifier.tokenKind {
                case .keyword(.willSet), .keyword(.didSet): false
                default: true
                }
            }
        }
    }
}

extension AttributeListSyntax {
    /// The first attribute spelled `@name` or `@SkyrosMacros.name`.
    func attribute(named name: String) -> AttributeSyntax? {
        for element in self {
            guard let attribute = element.as(AttributeSyntax.self) else { continue }
            let type = attribute.attributeName
            if let simple = type.as(IdentifierTypeSyntax.self), simple.name.text == name { return attribute }
            if let member = type.as(MemberTypeSyntax.self), member.name.text == name,
                member.baseType.as(IdentifierTypeSyntax.self)?.name.text == "SkyrosMacros"
            {
                return attribute
            }
        }
        return nil
    }

    /// The list without `attribute`.
    func removing(_ attribute: AttributeSyntax) -> AttributeListSyntax {
        self.filter { $0.as(AttributeSyntax.self).map { $0.trimmedDescription != attribute.trimmedDescription } ?? true }
    }
}

extension String {
    var trimmingBackticks: String {
        self.hasPrefix("`") && self.hasSuffix("`") && self.count >= 2 ? String(self.dropFirst().dropLast()) : self
    }
}

/// The arguments of an `@Column(…)`: its name, when given as a literal, and the `generated:` expression's text.
struct ColumnArguments {
    var name: String?
    /// The `name` argument when it is not a plain string literal.
    var nonLiteralName: ExprSyntax?
    var generated: ExprSyntax?

    init(_ attribute: AttributeSyntax) {
        guard case .argumentList(let arguments) = attribute.arguments else { return }
        for argument in arguments {
            switch argument.label?.text {
            case nil:
                if let literal = argument.expression.stringLiteralValue {
                    self.name = literal
                } else if argument.expression.is(NilLiteralExprSyntax.self) {
                    continue
                } else {
                    self.nonLiteralName = argument.expression
                }
            case "generated":
                if !argument.expression.is(NilLiteralExprSyntax.self) { self.generated = argument.expression.trimmed }
            default: continue
            }
        }
    }
}

extension ExprSyntax {
    /// The value of a string literal with no interpolation (`"created_at"`, `#"a\b"#`, escapes resolved), else
    /// `nil`.
    var stringLiteralValue: String? {
        self.as(StringLiteralExprSyntax.self)?.representedLiteralValue
    }
}

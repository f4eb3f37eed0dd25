import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Entity`: adds `tableName`, `columns`, `CodingKeys` (when a column's name is not its property's, or a property
/// is `@Transient`), `primaryKey` (when the key has several columns) and `relationships` (when a property is
/// `@Related`) to a struct, and its `Entity` conformance.
public struct EntityMacro: MemberMacro, ExtensionMacro {
    public static func expansion(
        of node: AttributeSyntax,
        providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let structDecl = declaration.as(StructDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: node, message: EntityDiagnostic.notAStruct(kind: declaration.kindDescription)))
            return []
        }
        return EntityLayout(node: node, structDecl: structDecl, context: context).members()
    }

    public static func expansion(
        of node: AttributeSyntax,
        attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol,
        conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        // `protocols` holds only the conformances the type does not declare already (`struct A: Entity` is fine).
        guard declaration.is(StructDeclSyntax.self), !protocols.isEmpty else { return [] }
        let conformances = protocols.map(\.trimmedDescription).joined(separator: ", ")
        return [try ExtensionDeclSyntax("extension \(type.trimmed): \(raw: conformances) {}")]
    }
}

extension DeclGroupSyntax {
    /// "a class", "an enum", … for diagnostics.
    var kindDescription: String {
        switch self.kind {
        case .classDecl: "a class"
        case .enumDecl: "an enum"
        case .actorDecl: "an actor"
        case .protocolDecl: "a protocol"
        case .extensionDecl: "an extension"
        default: "not a struct"
        }
    }
}

/// The columns, table and key of one `@Entity` struct, with the diagnostics of what is wrong in them.
struct EntityLayout {
    let typeName: String
    let access: String
    let table: String
    let columns: [(property: EntityProperty, name: String, generated: ExprSyntax?)]
    let transient: [EntityProperty]
    let primaryKey: [String]
    /// The entries of `relationships` (`.toOne(\.author, deleteRule: .cascade)`), in declaration order.
    let relationships: [String]
    let declared: Set<String>
    /// Two properties on one column (diagnosed): `CodingKeys` would repeat a raw value, another error.
    let hasDuplicateColumns: Bool

    /// Reads the struct and diagnoses what is wrong in it. The members are derived even then (a default table,
    /// the valid part of a key), so that the compiler reports the macro's error rather than a missing `Entity`
    /// requirement besides.
    init(node: AttributeSyntax, structDecl: StructDeclSyntax, context: some MacroExpansionContext) {
        self.typeName = structDecl.name.text
        self.access = structDecl.modifiers.lazy.map(\.name.text).first { ["public", "package"].contains($0) }
            .map { "\($0) " } ?? ""

        // @Entity(table: "…", primaryKey: "a", "b")
        var table: String?
        var primaryKeyExpressions: [ExprSyntax] = []
        if case .argumentList(let arguments) = node.arguments {
            var inPrimaryKey = false
            for argument in arguments {
                if let label = argument.label?.text { inPrimaryKey = label == "primaryKey" }
                if argument.label?.text == "table" {
                    if let literal = argument.expression.stringLiteralValue {
                        table = literal
                    } else if !argument.expression.is(NilLiteralExprSyntax.self) {
                        context.diagnose(Diagnostic(node: argument.expression, message: EntityDiagnostic.tableNotALiteral))
                    }
                } else if inPrimaryKey {
                    primaryKeyExpressions.append(argument.expression)
                }
            }
        }
        self.table = table ?? snakeCased(self.typeName)

        let properties = EntityProperty.all(in: structDecl.memberBlock.members)
        self.declared = Set(
            properties.map(\.name)
                + structDecl.memberBlock.members.compactMap {
                    $0.decl.as(EnumDeclSyntax.self)?.name.text ?? $0.decl.as(TypeAliasDeclSyntax.self)?.name.text
                })

        var columns: [(property: EntityProperty, name: String, generated: ExprSyntax?)] = []
        var transient: [EntityProperty] = []
        var byColumn: [String: EntityProperty] = [:]
        for property in properties where property.isStored {
            if property.transient != nil {
                // @Column beside it, or no initial value: diagnosed by the peer macros.
                transient.append(property)
                continue
            }
            if case .toMany(let target) = property.relationship {
                context.diagnose(
                    Diagnostic(
                        node: property.node, message: EntityDiagnostic.storedToMany(property: property.name, target: target),
                        fixIts: [Self.makeComputed(property, target: target)]))
                continue
            }
            let arguments = property.column.map(ColumnArguments.init)
            let name = arguments?.name ?? property.defaultColumnName
            if let first = byColumn[name] {
                context.diagnose(
                    Diagnostic(
                        node: property.node,
                        message: EntityDiagnostic.duplicateColumn(column: name, property: property.name, first: first.name),
                        notes: [Note(node: first.node, message: EntityNote(message: "'\(first.name)' is mapped to \"\(name)\" here"))]
                    ))
            }
            byColumn[name] = property
            columns.append((property, name, arguments?.generated))
        }
        self.columns = columns
        self.hasDuplicateColumns = Set(columns.map(\.name)).count < columns.count
        self.transient = transient

        var primaryKey: [String] = []
        let stored = properties.filter { $0.isStored && $0.transient == nil }
        for expression in primaryKeyExpressions {
            guard let name = expression.stringLiteralValue else {
                context.diagnose(Diagnostic(node: expression, message: EntityDiagnostic.primaryKeyNotALiteral))
                continue
            }
            if stored.contains(where: { $0.name == name }) {
                primaryKey.append(name)
                continue
            }
            let suggestion = stored.first { $0.name.lowercased() == name.lowercased() }?.name
            var fixIts: [FixIt] = []
            if let suggestion, let literal = expression.as(StringLiteralExprSyntax.self) {
                fixIts.append(
                    FixIt(
                        message: EntityNote(message: "Replace with '\(suggestion)'"),
                        changes: [.replace(oldNode: Syntax(literal), newNode: Syntax(StringLiteralExprSyntax(content: suggestion)))]))
            }
            context.diagnose(
                Diagnostic(
                    node: expression, message: EntityDiagnostic.unknownPrimaryKeyProperty(name: name, suggestion: suggestion),
                    fixIts: fixIts))
        }
        self.primaryKey = primaryKey

        // The relationships the properties declare with @Related (their mistakes diagnosed by @Related itself).
        var relationships: [String] = []
        let relationshipsByHand = self.declared.contains("relationships")
        for property in properties where !property.isStatic && property.transient == nil {
            guard let related = property.related else {
                if case .toMany(let target) = property.relationship, !property.isStored, !relationshipsByHand {
                    context.diagnose(
                        Diagnostic(node: property.node, message: EntityDiagnostic.toManyWithoutInverse(property: property.name, target: target)))
                }
                continue
            }
            if relationshipsByHand {
                context.diagnose(Diagnostic(node: related, message: EntityDiagnostic.relationshipsDeclaredByHand(property: property.name)))
                continue
            }
            let arguments = RelatedArguments(related)
            switch property.relationship {
            case .toOne where property.isStored:
                let rule = arguments.deleteRule.map { ", deleteRule: \($0.expression.trimmedDescription)" } ?? ""
                relationships.append(".toOne(\\.\(property.spelling)\(rule))")
            case .toMany where !property.isStored:
                if let inverse = arguments.inverse {
                    relationships.append(".toMany(\\.\(property.spelling), inverse: \(inverse.expression.trimmedDescription))")
                }
            default: continue
            }
        }
        self.relationships = relationships

        if !properties.contains(where: { $0.name == "id" }) {
            context.diagnose(Diagnostic(node: structDecl.name, message: EntityDiagnostic.noIDProperty(type: self.typeName)))
        }
    }

    /// Whether the synthesized `Codable` keys would not be the column names.
    var needsCodingKeys: Bool {
        !self.hasDuplicateColumns && (!self.transient.isEmpty || self.columns.contains { $0.name != $0.property.name })
    }

    func members() -> [DeclSyntax] {
        var members: [DeclSyntax] = []
        if !self.declared.contains("tableName") {
            members.append("\(raw: self.access)static let tableName = \(literal: self.table)")
        }
        if !self.declared.contains("columns") {
            let entries = self.columns.map { column in
                let generated = column.generated.map { ", generated: \($0.trimmedDescription)" } ?? ""
                return "    EntityColumn(\\.\(column.property.spelling), \(StringLiteralExprSyntax(content: column.name))\(generated)),\n"
            }
            members.append(
                "\(raw: self.access)static let columns: [EntityColumn<\(raw: self.typeName)>] = [\n\(raw: entries.joined())]")
        }
        if self.needsCodingKeys, !self.declared.contains("CodingKeys") {
            let cases = self.columns.map { column in
                column.name == column.property.name
                    ? "    case \(column.property.spelling)\n"
                    : "    case \(column.property.spelling) = \(StringLiteralExprSyntax(content: column.name))\n"
            }
            members.append("enum CodingKeys: String, CodingKey {\n\(raw: cases.joined())}")
        }
        if !self.primaryKey.isEmpty, !self.declared.contains("primaryKey") {
            let keyPaths = self.primaryKey.map { "\\.\($0)" }.joined(separator: ", ")
            members.append("\(raw: self.access)static let primaryKey = PrimaryKey<\(raw: self.typeName)>(\(raw: keyPaths))")
        }
        if !self.relationships.isEmpty, !self.declared.contains("relationships") {
            let entries = self.relationships.map { "    \($0),\n" }.joined()
            members.append(
                "\(raw: self.access)static let relationships: [Relationship<\(raw: self.typeName)>] = [\n\(raw: entries)]")
        }
        return members
    }

    /// The fix-it turning a stored `ToMany` into the computed property that names the relationship.
    private static func makeComputed(_ property: EntityProperty, target: String) -> FixIt {
        let binding = property.binding
        let type = binding.typeAnnotation?.type.trimmed ?? TypeSyntax("ToMany<\(raw: target)>")
        let computed = binding
            .with(\.pattern, binding.pattern.with(\.trailingTrivia, []))
            .with(\.typeAnnotation, TypeAnnotationSyntax(colon: .colonToken(trailingTrivia: .space), type: type.with(\.trailingTrivia, .space)))
            .with(\.initializer, nil)
            .with(
                \.accessorBlock,
                AccessorBlockSyntax(
                    leftBrace: .leftBraceToken(trailingTrivia: .space),
                    accessors: .getter([CodeBlockItemSyntax(item: .expr("ToMany()"))]),
                    rightBrace: .rightBraceToken(leadingTrivia: .space)))
        var changes: [FixIt.Change] = [.replace(oldNode: Syntax(binding), newNode: Syntax(computed))]
        if let variable = binding.parent?.parent?.as(VariableDeclSyntax.self), variable.bindingSpecifier.tokenKind == .keyword(.let) {
            changes.append(
                .replace(oldNode: Syntax(variable.bindingSpecifier), newNode: Syntax(variable.bindingSpecifier.with(\.tokenKind, .keyword(.var)))))
        }
        return FixIt(message: EntityNote(message: "Make '\(property.name)' computed"), changes: changes)
    }
}

extension EntityProperty {
    /// The column of a property not named by `@Column`: its name in snake case, and for a `Reference` (a foreign
    /// key) the referenced id's `_id` after it (`author` → `author_id`), unless the name already ends so
    /// (`authorID` → `author_id`).
    var defaultColumnName: String {
        let name = snakeCased(self.name)
        guard case .toOne = self.relationship, name != "id", !name.hasSuffix("_id") else { return name }
        return name + "_id"
    }
}

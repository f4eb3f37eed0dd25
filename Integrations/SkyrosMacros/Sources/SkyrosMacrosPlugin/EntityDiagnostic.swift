import SwiftDiagnostics
import SwiftSyntax

/// What the macros report at compile time. Each message names the property or the column concerned and says
/// what to write instead.
enum EntityDiagnostic: DiagnosticMessage {
    case notAStruct(kind: String)
    case noIDProperty(type: String)
    case tableNotALiteral
    case primaryKeyNotALiteral
    case unknownPrimaryKeyProperty(name: String, suggestion: String?)
    case columnNameNotALiteral(property: String)
    case emptyColumnName(property: String)
    case duplicateColumn(column: String, property: String, first: String)
    case columnOnComputed(property: String)
    case columnOnStatic(property: String)
    case columnAndTransient(property: String)
    case transientWithoutValue(property: String)
    case transientOnComputed(property: String)
    case identityOnLet(property: String)
    case relatedOnOtherType(property: String, type: String?)
    case relatedOnStatic(property: String)
    case relatedOnComputedReference(property: String)
    case relatedAndTransient(property: String)
    case deleteRuleOnToMany(property: String, target: String)
    case inverseOnToOne(property: String, target: String)
    case setNullOnNonOptional(property: String, target: String)
    case toManyWithoutInverse(property: String, target: String)
    case inverseOfAnotherEntity(property: String, target: String, root: String)
    case storedToMany(property: String, target: String)
    case relationshipsDeclaredByHand(property: String)

    var message: String {
        switch self {
        case .notAStruct(let kind):
            "@Entity applies to a struct; this is \(kind) (an entity is a value: a row)"
        case .noIDProperty(let type):
            "@Entity struct '\(type)' has no 'id' property: add the primary key's stored property 'id' (or, for a key of several columns, a computed 'id' and @Entity(primaryKey: …))"
        case .tableNotALiteral:
            "the table name of @Entity must be a string literal, such as @Entity(table: \"books\")"
        case .primaryKeyNotALiteral:
            "the primary key's properties must be string literals naming stored properties, such as @Entity(primaryKey: \"courseID\", \"studentID\")"
        case .unknownPrimaryKeyProperty(let name, let suggestion):
            "the primary key names '\(name)', which is not a stored property of this entity"
                + (suggestion.map { "; did you mean '\($0)'?" } ?? "")
        case .columnNameNotALiteral(let property):
            "the column name of '\(property)' must be a string literal, such as @Column(\"\(snakeCased(property))\")"
        case .emptyColumnName(let property):
            "the column name of '\(property)' is empty"
        case .duplicateColumn(let column, let property, let first):
            "'\(property)' and '\(first)' are both mapped to column \"\(column)\": name one of them with @Column(\"…\")"
        case .columnOnComputed(let property):
            "@Column applies to a stored property; '\(property)' is computed, so it has no column"
        case .columnOnStatic(let property):
            "@Column applies to a stored instance property; '\(property)' is static"
        case .columnAndTransient(let property):
            "'\(property)' is both @Column and @Transient: a transient property has no column"
        case .transientWithoutValue(let property):
            "@Transient property '\(property)' needs an initial value: a fetched row does not hold it, so decoding must leave it at its default"
        case .identityOnLet(let property):
            "an identity column is given its id at insert: declare '\(property)' with 'var'"
        case .transientOnComputed(let property):
            "@Transient applies to a stored property; '\(property)' is not stored, so it is not a column anyway"
        case .relatedOnOtherType(let property, let type):
            "@Related applies to a Reference<Target> property (a to-one) or a computed ToMany<Target> property (a to-many); "
                + (type.map { "'\(property)' is of type '\($0)'" } ?? "write the type of '\(property)'")
        case .relatedOnStatic(let property):
            "@Related applies to an instance property; '\(property)' is static"
        case .relatedOnComputedReference(let property):
            "@Related on a Reference applies to a stored property (its column is the foreign key); '\(property)' is computed"
        case .relatedAndTransient(let property):
            "'\(property)' is both @Related and @Transient: a transient property has no column, so it is no relationship"
        case .deleteRuleOnToMany(let property, let target):
            "the to-many '\(property)' has no delete rule of its own: the foreign key of its inverse has it, so write deleteRule: on the reference of \(target) and name that reference here with inverse:"
        case .inverseOnToOne(let property, let target):
            "the to-one '\(property)' is its own foreign key, so it has no inverse: the ToMany<…> property of \(target) names '\(property)' as its inverse"
        case .setNullOnNonOptional(let property, let target):
            "ON DELETE SET NULL stores NULL in the column of '\(property)': declare it optional, Reference<\(target)>?, or choose another delete rule"
        case .toManyWithoutInverse(let property, let target):
            "the to-many '\(property)' needs its inverse, the reference of \(target) to this entity: @Related(inverse: \\\(target).…)"
        case .inverseOfAnotherEntity(let property, let target, let root):
            "'\(property)' is a ToMany<\(target)>, so its inverse is a reference of \(target), not of \(root)"
        case .storedToMany(let property, let target):
            "a ToMany property holds no rows and is not a column: make '\(property)' computed, 'var \(property): ToMany<\(target)> { ToMany() }'"
        case .relationshipsDeclaredByHand(let property):
            "this struct declares 'relationships' itself, so @Related on '\(property)' is not read: list the relationship there, or remove that declaration"
        }
    }

    var diagnosticID: MessageID {
        let id: String = switch self {
        case .notAStruct: "notAStruct"
        case .noIDProperty: "noIDProperty"
        case .tableNotALiteral: "tableNotALiteral"
        case .primaryKeyNotALiteral: "primaryKeyNotALiteral"
        case .unknownPrimaryKeyProperty: "unknownPrimaryKeyProperty"
        case .columnNameNotALiteral: "columnNameNotALiteral"
        case .emptyColumnName: "emptyColumnName"
        case .duplicateColumn: "duplicateColumn"
        case .columnOnComputed: "columnOnComputed"
        case .columnOnStatic: "columnOnStatic"
        case .columnAndTransient: "columnAndTransient"
        case .transientWithoutValue: "transientWithoutValue"
        case .transientOnComputed: "transientOnComputed"
        case .identityOnLet: "identityOnLet"
        case .relatedOnOtherType: "relatedOnOtherType"
        case .relatedOnStatic: "relatedOnStatic"
        case .relatedOnComputedReference: "relatedOnComputedReference"
        case .relatedAndTransient: "relatedAndTransient"
        case .deleteRuleOnToMany: "deleteRuleOnToMany"
        case .inverseOnToOne: "inverseOnToOne"
        case .setNullOnNonOptional: "setNullOnNonOptional"
        case .toManyWithoutInverse: "toManyWithoutInverse"
        case .inverseOfAnotherEntity: "inverseOfAnotherEntity"
        case .storedToMany: "storedToMany"
        case .relationshipsDeclaredByHand: "relationshipsDeclaredByHand"
        }
        return MessageID(domain: "SkyrosMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}

/// A note or a fix-it's label.
struct EntityNote: NoteMessage, FixItMessage {
    let message: String
    var noteID: MessageID { MessageID(domain: "SkyrosMacros", id: self.message) }
    var fixItID: MessageID { self.noteID }
}

extension FixIt {
    /// Removes the attribute `node` (named `name` in the fix-it, e.g. `@Column`) from `variable`.
    static func removing(_ node: AttributeSyntax, named name: String, from variable: VariableDeclSyntax) -> FixIt {
        FixIt(
            message: EntityNote(message: "Remove '\(name)'"),
            changes: [
                .replace(
                    oldNode: Syntax(variable),
                    newNode: Syntax(variable.with(\.attributes, variable.attributes.removing(node)).with(\.leadingTrivia, variable.leadingTrivia)))
            ])
    }
}

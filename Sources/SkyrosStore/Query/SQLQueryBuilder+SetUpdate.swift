import Foundation
import SkyrosPostgres

extension SQLQueryBuilder {
    /// `UPDATE <table> SET <column> = <expression>…[, <version> = <version> + 1] [WHERE <predicate>]
    /// RETURNING <id>, <version>`: a set-based update. Columns are named unqualified (the statement has no alias a
    /// user's column could shadow), constants are bound.
    /// - Throws: ``StoreError/unknownColumn(entity:column:)`` for a key path that is not one of the entity's
    ///   columns, for the primary key, and for a column the database sets; `QueryError` for the predicate.
    package static func update<T: Entity>(
        where predicate: Predicate<T>?, set assignments: [ColumnAssignment<T>], schema: String?
    ) throws -> PGQuery {
        let plan = try EntityPlan<T>.shared
        var writer = try SQLWriter(T.self, schema: schema)
        writer.append("UPDATE ")
        writer.append(self.table(T.self, schema))
        writer.append(" SET ")
        for (position, assignment) in try self.checked(assignments, plan: plan).enumerated() {
            if position > 0 { writer.append(", ") }
            writer.append(quoteIdentifier(assignment.column) + " = ")
            try self.write(assignment.assignment.expression, plan: plan, into: &writer)
        }
        if let versionColumn = plan.versionColumn {
            writer.append(", \(quoteIdentifier(versionColumn)) = \(quoteIdentifier(versionColumn)) + 1")
        }
        try self.writeWhere(predicate, into: &writer)
        writer.append(" RETURNING \(plan.keyExpression), \(plan.versionExpression)")
        return PGQuery(unsafeSQL: writer.sql, binds: writer.binds)
    }

    /// The assignments with their column names, each column at most once (the last assignment wins, as it
    /// would in memory), and only columns an update may write.
    static func checked<T: Entity>(
        _ assignments: [ColumnAssignment<T>], plan: EntityPlan<T>
    ) throws -> [(column: String, index: Int, assignment: ColumnAssignment<T>)] {
        var result: [(column: String, index: Int, assignment: ColumnAssignment<T>)] = []
        for assignment in assignments {
            guard let column = assignment.column, let index = plan.columnIndex[column], !plan.isKeyColumn(index),
                !(plan.hasReadBack && plan.readBackIndices.contains(index))
            else {
                throw StoreError.unknownColumn(
                    entity: plan.entityName,
                    column: (assignment.column ?? "a key path that is not a column") + " (a set-based update writes the columns the app sets, not the primary key)")
            }
            result.removeAll { $0.column == column }
            result.append((column, index, assignment))
        }
        if result.isEmpty { throw StoreError.unknownColumn(entity: plan.entityName, column: "none (a set-based update needs a column to set)") }
        return result
    }

    private static func write<T: Entity>(_ node: ColumnExpressionNode, plan: EntityPlan<T>, into writer: inout SQLWriter) throws {
        switch node {
        case .column(let name):
            guard let name, plan.columnIndex[name] != nil else {
                throw StoreError.unknownColumn(entity: plan.entityName, column: name ?? "a key path that is not a column")
            }
            writer.append(quoteIdentifier(name))
        case .bound(let value):
            writer.bind(try value.get())
        case .binary(let operation, let lhs, let rhs):
            writer.append("(")
            try self.write(lhs, plan: plan, into: &writer)
            writer.append(" \(operation.rawValue) ")
            try self.write(rhs, plan: plan, into: &writer)
            writer.append(")")
        }
    }
}

extension ColumnAssignment {
    /// Checks a set-based update as the stores will run it: its columns and its predicate's translation.
    /// - Throws: what ``SQLQueryBuilder/update(where:set:schema:)`` throws.
    package static func check(_ assignments: [ColumnAssignment<Root>], where predicate: Predicate<Root>?) throws {
        _ = try SQLQueryBuilder.update(where: predicate, set: assignments, schema: nil)
    }
}

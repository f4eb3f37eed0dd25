import Foundation

extension FetchDescriptor {
    /// The entity types whose rows the predicate reads through references (`$0.author.name` reads authors),
    /// each once: an observation of the fetch also watches their tables. Empty when the predicate reads none,
    /// or cannot be translated (the fetch itself then fails with the reason).
    package var predicateReferencedTypes: [any Entity.Type] {
        // Only an entity with a reference can read through one: the others (most) skip translating the
        // predicate, which every layer of a stack's fetch and count asks about.
        guard self.predicate != nil, RelationshipCatalog.relationships(of: T.self).contains(where: { $0.kind == .toOne }),
            let translation = try? SQLQueryBuilder.translation(self.predicate)
        else { return [] }
        return translation.referencedTypes
    }
}

extension FetchDescriptor {
    /// The tables whose rows decide the result: the entity's, and those the predicate reads through references.
    /// A layer holding changes of any of them cannot take its parent's filtered answer as it is.
    package var readTables: [String] { Self.readTables(referencing: self.predicateReferencedTypes) }

    /// ``readTables`` from the ``predicateReferencedTypes`` a caller already has, so that the predicate is
    /// translated once.
    package static func readTables(referencing referenced: [any Entity.Type]) -> [String] {
        [T.tableName] + referenced.map { $0.tableName }
    }

    /// Every row of the entity in this descriptor's order: what a layer fetches from its parent when it must
    /// evaluate a predicate across references itself (see ``readTables``).
    package var unfiltered: FetchDescriptor<T> { FetchDescriptor(sortBy: self.sortBy) }
}

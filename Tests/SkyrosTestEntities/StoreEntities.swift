import Foundation
import SkyrosStore

// The store suites' entities (the conformance and safety suites on a server, the row codec without one).

/// A role stored as its raw value (text).
package enum StoreRole: String, Codable, Sendable, Equatable {
    case admin, member
}

/// A nested value stored as jsonb.
package struct StoreAddress: Codable, Sendable, Equatable {
    package var street: String
    package var city: String
    package var movedIn: Date?

    package init(street: String, city: String, movedIn: Date?) {
        (self.street, self.city, self.movedIn) = (street, city, movedIn)
    }
}

package struct StorePet: Codable, Sendable, Equatable {
    package var name: String
    package var legs: Int

    package init(name: String, legs: Int) {
        (self.name, self.legs) = (name, legs)
    }
}

/// The conformance suite's main entity: every supported kind of property, snake_case keys.
package struct StoreUser: Entity, Equatable, ColumnKeyStrategyProviding {
    package var id: Int
    package var name: String
    package var age: Int?
    package var email: String?
    package var score: Double
    package var balance: Decimal
    package var createdAt: Date
    package var avatar: Data?
    package var tags: [String]
    package var role: StoreRole
    package var address: StoreAddress
    package var pets: [StorePet]
    package var attributes: [String: Int]
    package var externalID: UUID

    package init(
        id: Int, name: String, age: Int?, email: String?, score: Double, balance: Decimal, createdAt: Date, avatar: Data?,
        tags: [String], role: StoreRole, address: StoreAddress, pets: [StorePet], attributes: [String: Int], externalID: UUID
    ) {
        (self.id, self.name, self.age, self.email, self.score) = (id, name, age, email, score)
        (self.balance, self.createdAt) = (balance, createdAt)
        (self.avatar, self.tags, self.role, self.address, self.pets, self.attributes, self.externalID) =
            (avatar, tags, role, address, pets, attributes, externalID)
    }

    package static let tableName = "store_users"
    package static let columnKeyStrategy = ColumnKeyStrategy.convertToSnakeCase
    package static let columns: [EntityColumn<StoreUser>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.name, "name"), EntityColumn(\.age, "age"),
        EntityColumn(\.email, "email"), EntityColumn(\.score, "score"), EntityColumn(\.balance, "balance"),
        EntityColumn(\.createdAt, "created_at"), EntityColumn(\.avatar, "avatar"), EntityColumn(\.tags, "tags"),
        EntityColumn(\.role, "role"), EntityColumn(\.address, "address"), EntityColumn(\.pets, "pets"),
        EntityColumn(\.attributes, "attributes"), EntityColumn(\.externalID, "external_id"),
    ]
    package static let defaultSort = [SortDescriptor(\StoreUser.name)]

    package static func make(_ id: Int, name: String? = nil, age: Int? = nil) -> StoreUser {
        StoreUser(
            id: id, name: name ?? "user \(id)", age: age, email: id % 2 == 0 ? "u\(id)@example.com" : nil,
            score: Double(id) + 0.5, balance: Decimal(string: "1234567890.123456789")! + Decimal(id),
            createdAt: Date(timeIntervalSince1970: 1_700_000_000.25 + Double(id)),
            avatar: id % 3 == 0 ? Data([0, 1, 2, 255, UInt8(id % 256)]) : nil,
            tags: ["t\(id)", "common"], role: id % 2 == 0 ? .admin : .member,
            address: StoreAddress(street: "\(id) Main St", city: "Skyros", movedIn: Date(timeIntervalSince1970: 1_600_000_000.5)),
            pets: id % 2 == 0 ? [StorePet(name: "Rex", legs: 4)] : [], attributes: ["level": id],
            externalID: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", id))!)
    }

    package static func createTable(_ table: String) -> String {
        """
        CREATE TABLE \(table) (
            id bigint PRIMARY KEY, name text NOT NULL, age integer, email text, score double precision NOT NULL,
            balance numeric NOT NULL, created_at timestamptz NOT NULL, avatar bytea, tags text[] NOT NULL,
            role text NOT NULL, address jsonb NOT NULL, pets jsonb NOT NULL, attributes jsonb NOT NULL,
            external_id uuid NOT NULL)
        """
    }
}

/// An entity with a version column: versions are 1, 2, 3… on both stores.
package struct StoreCounter: Entity, Equatable {
    package var id: String
    package var value: Int

    package init(id: String, value: Int) {
        (self.id, self.value) = (id, value)
    }

    package static let tableName = "counters"
    package static let columns: [EntityColumn<StoreCounter>] = [EntityColumn(\.id, "id"), EntityColumn(\.value, "value")]
    package static let versionColumn: String? = "row_version"

    package static func createTable(_ table: String) -> String {
        "CREATE TABLE \(table) (id text PRIMARY KEY, value bigint NOT NULL, row_version bigint NOT NULL DEFAULT 1)"
    }
}

/// Table and column names that need quoting.
package struct StoreQuoted: Entity, Equatable {
    package var id: UUID
    package var order: Int
    package var select: String
    package var mixedCase: String?

    package init(id: UUID, order: Int, select: String, mixedCase: String?) {
        (self.id, self.order, self.select, self.mixedCase) = (id, order, select, mixedCase)
    }

    package enum CodingKeys: String, CodingKey {
        case id, order, select
        case mixedCase = "Mixed \"Case\""
    }

    package static let tableName = "user data"
    package static let columns: [EntityColumn<StoreQuoted>] = [
        EntityColumn(\.id, "id"), EntityColumn(\.order, "order"), EntityColumn(\.select, "select"),
        EntityColumn(\.mixedCase, "Mixed \"Case\""),
    ]
    package static let defaultSort = [SortDescriptor(\StoreQuoted.order)]

    package static func createTable(_ table: String) -> String {
        "CREATE TABLE \(table) (id uuid PRIMARY KEY, \"order\" integer NOT NULL, \"select\" text NOT NULL, \"Mixed \"\"Case\"\"\" text)"
    }
}

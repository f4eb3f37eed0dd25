@testable import SkyrosPostgres
import Testing

/// SQLSTATE matching: a class constant (a code ending in `000`) matches every code of its class, whichever side of
/// `~=` it is on, optional or not, and in a `switch`.
@Suite("SQLSTATE classes")
struct SQLStateTests {
    @Test("A class constant matches the codes of its class in every spelling; other codes match only themselves")
    func classMatching() {
        let unique: SQLState? = .uniqueViolation
        let plain = SQLState("23505")
        let missing: SQLState? = nil
        #expect(SQLState.integrityConstraintViolation ~= unique)
        #expect(unique ~= .integrityConstraintViolation)
        #expect(SQLState.integrityConstraintViolation ~= plain)
        // Two non-optional codes: the pattern comes first, as in a `switch`.
        #expect(!(SQLState.uniqueViolation ~= SQLState.integrityConstraintViolation))
        #expect(!(missing ~= .integrityConstraintViolation))
        #expect(!(SQLState.integrityConstraintViolation ~= missing))
        #expect(!(unique ~= .connectionException))
        #expect(!(SQLState.uniqueViolation ~= SQLState.foreignKeyViolation))
        #expect(SQLState.uniqueViolation ~= plain)

        func kind(_ state: SQLState?) -> String {
            switch state {
            case .uniqueViolation: "unique"
            case .integrityConstraintViolation: "integrity"
            default: "other"
            }
        }
        #expect(kind(.uniqueViolation) == "unique")
        #expect(kind(.foreignKeyViolation) == "integrity")
        #expect(kind(.serializationFailure) == "other")
        #expect(kind(nil) == "other")
        // A server may send a class's generic code: it is that class, not one of its specific codes.
        #expect(kind(.integrityConstraintViolation) == "integrity")
        #expect(!(SQLState.uniqueViolation ~= Optional(SQLState.integrityConstraintViolation)))
        #expect(!(Optional(SQLState.integrityConstraintViolation) ~= .uniqueViolation))
    }

    @Test("Errors are classified by their exact code: a class's generic code is not one of its specific codes")
    func classificationUsesExactCodes() {
        let generic = [("23000", PGError.Kind.server), ("40000", .server), ("42000", .server), ("57000", .server),
                       ("23505", .uniqueViolation), ("40001", .serializationFailure), ("08006", .connectionLost)]
        for (code, kind) in generic {
            #expect(PGError.kind(for: SQLState(code)) == kind, "\(code)")
        }
        #expect(!PGError(kind: PGError.kind(for: SQLState("40000")), sqlState: SQLState("40000"), message: "").isTransient)
    }

    @Test("A server error of class 08 (connection exception) is transient; other server errors are not")
    func connectionExceptionClassIsTransient() {
        #expect(PGError(kind: .server, sqlState: SQLState("08P01"), message: "protocol violation").isTransient)
        #expect(PGError(kind: .server, sqlState: .connectionFailure, message: "connection failure").isTransient)
        #expect(!PGError(kind: .server, sqlState: .invalidTextRepresentation, message: "bad input").isTransient)
    }
}

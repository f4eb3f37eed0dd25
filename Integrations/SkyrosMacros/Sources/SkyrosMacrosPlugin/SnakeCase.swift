/// `authorID` → `author_id`, `OrderLine` → `order_line`, `userURL` → `user_url`: the rule of Skyros's
/// `ColumnKeyStrategy.convertToSnakeCase` (and `JSONEncoder.KeyEncodingStrategy`), so that a column the macro
/// names and one the strategy names are the same.
func snakeCased(_ name: String) -> String {
    let characters = Array(name)
    var out = ""
    out.reserveCapacity(characters.count + 4)
    for (i, character) in characters.enumerated() {
        if character.isUppercase, i > 0 {
            let previous = characters[i - 1]
            let nextIsLower = i + 1 < characters.count && characters[i + 1].isLowercase
            if previous.isLowercase || previous.isNumber || (previous.isUppercase && nextIsLower) {
                out.append("_")
            }
        }
        out += character.lowercased()
    }
    return out
}

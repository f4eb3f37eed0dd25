// Prelude of the docs' code blocks (scripts/check-snippets): a started stack and a context, for fragments that
// use them. Use with `app` (prelude=app,stack).
import Skyros

var stack: DataStack { fatalError() }
var context: DataContext { fatalError() }

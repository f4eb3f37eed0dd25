// Prelude of the docs' code blocks (scripts/check-snippets): only the imports a fragment leaves out.
import Foundation
import Logging
import Skyros

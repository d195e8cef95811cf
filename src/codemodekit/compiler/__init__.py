"""TypeScript to JavaScript: position-preserving type erasure, syntax checks and diagnostics in the user's own line and column."""

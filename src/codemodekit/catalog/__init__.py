"""The immutable, revisioned catalog of normalized tools, its read-only values and the lock file."""

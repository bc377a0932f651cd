"""AWS plumbing shared by the storage backend, the evaluator and the CLI."""

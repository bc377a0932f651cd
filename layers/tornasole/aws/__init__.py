"""AWS plumbing shared by the storage backend, the evaluator and the CLI.

Floor plan: imported by storage and the packages above it (evaluator, jobs, local, cli); imports
only exceptions and extras.
"""

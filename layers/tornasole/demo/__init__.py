"""The demo: a healthy and a broken training run evaluated end to end by the local pipeline.

Floor plan: imported only by cli (``tornasole demo``); it uses the public API (jobs, local, pytorch,
rules, trials), never cli.
"""

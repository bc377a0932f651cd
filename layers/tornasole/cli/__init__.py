"""The ``tornasole`` command: local mode, jobs, rules, trials, plots and the demo.

Floor plan: the top floor; nothing in tornasole imports it but ``tornasole.rules.rule_invoker``,
smdebug's path, which re-exports the command of :mod:`tornasole.cli.smdebug_invoker`.
"""

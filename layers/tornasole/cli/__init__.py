"""The ``tornasole`` command: local mode, jobs, rules, trials, plots and the demo."""

"""The custom-rule sandbox: where a user's rule code runs, and what confines it.

Evaluator side: ``rule_runners`` (``LambdaCustomRuleRunner``: a job-scoped session, the sandbox
function invoked, its reply checked; ``InProcessCustomRuleRunner``), ``session_policy`` (the inline
policy narrowing the reader role to one job's trial and rule file), ``wire`` (the request and the
reply, checked as hostile input). The rule's side: ``rule_process`` (one rule at one step: its
reply), ``zygote`` (the process forked at cold start whose children run the requests, in Lambda),
``forked`` (a child forked per request, elsewhere), ``confine`` (what a rule's process may do:
rlimits, seccomp, no role keys), ``isolation`` (a rule's run in a thread: exits, deadline, memory
budget; every rule, built-in or custom, runs under it).

Imports ``store`` and the evaluator's values; never the pipeline or ``registration``: the rule's
process gets its step runner from its caller (the sandbox function's handler, the local mode).
"""

"""`promptloop view`: a read-only local web app over the state folder.

Runs list, run pages (the HTML report), two-run comparisons with the gate's paired table, the
prompt diff and side-by-side trials, per-bucket trends, optimize sessions, the ledger and
nightly summaries. Layered between `workflows` and `cli`: it reads through the report store,
the ledger, the gate and the nightly workflow, and never imports `cli` or `rich`.
"""

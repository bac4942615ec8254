"""Capacity: what an environment's work needs of the account at once, against what the account
allows, and what it may cost — before anything is paid for.

`assess(plan, requests, book)` (capacity/assess.py) walks every entry of an environment once —
each job's rendered instance candidates, searches, endpoints with their instance pools and shadow
variant, LLM optimization jobs, batch transforms, clusters' instance groups — and sums what runs at
once per Service Quotas name; the quota values come in a QuotaBook (capacity/ledger.py: the live
account, read by ops/account.py, or the environment's snapshot). `sagestack plan` prints the
report, synth fails on its shortfalls (app/builder.py), `sagestack check` summarises it.

A feature like the others: it imports core and the features whose work it counts, never the
project (`plan` and `requests` are read through the Protocols in capacity/assess.py), and nothing
here calls AWS.
"""

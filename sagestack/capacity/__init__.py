"""Capacity: what an environment's work needs of the account at once, against what the account
allows, and what it may cost — before anything is paid for.

`assess(plan, requests, book)` (capacity/assess.py) walks the environment's one rendering once —
each job's instance candidates (CreateTrainingJob), searches, endpoints' fleets (CreateEndpointConfig:
instance pools and shadow variant; RegisterScalableTarget: the autoscaling maximum), batch
transforms' candidates (CreateTransformJob), clusters' instance groups (CreateCluster), and LLM
optimization jobs — and sums what runs at once per Service Quotas name; the quota values come in a QuotaBook (capacity/ledger.py: the live
account, read by ops/account.py, or the environment's snapshot). `sagestack plan` prints the
report, synth fails on its shortfalls (app/builder.py), `sagestack check` summarises it.

A feature like the others: it imports core and the features whose work it counts, never the
project (`plan` and `requests` are read through the Protocols in capacity/assess.py), and nothing
here calls AWS.
"""

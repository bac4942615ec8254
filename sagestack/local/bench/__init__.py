"""`sagestack local bench`: an endpoint's local configurations swept against the workload its
`slo:` describes (report.py: each load point and whether it meets the target; classic.py: batching
and workers over the serving room's server in a process of its own, measured by its load
generator; llm.py: batch size and concurrency over the LLM room's server, streamed through boto3's
client; chart.py: latency against throughput as a PNG and as text). It emulates no AWS part: it
measures the serving and llm rooms, which AWS's container code judges, against the workload the
cloud's benchmark would run (the same slo:), so the two read alike."""

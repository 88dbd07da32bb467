"""fragmask's benchmark suite: named workloads (workloads.toml), routines that time them
beside their peers, results as JSONL, a report generator and an A/B mode. See bench/README.md."""

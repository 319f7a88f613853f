"""Running probes on EPs: worker processes, the canary, pipelined probes, crashes and hangs.

Owns: starting workers (:mod:`.spawn`), one worker as the parent sees it (:mod:`.workers`),
whether an EP is live (:mod:`.canary`), the run's schedule (:mod:`.runner`), the probes it
shares between EPs (:mod:`.probeset`, read one at a time from the probe cache), replies as
observations (:mod:`.collect`), Ctrl-C and SIGTERM (:mod:`.interrupt`), deliberately broken EPs
(:mod:`.faults`), the proof that every probe catches them (:mod:`.selftest`) and a run's work
split into CI shards (:mod:`.shard`).
May import: contract, worker, classify, cache (the indexed probe file), catalog, matrix.
Imported by: providers, audit, conformance, report (the selftest table), scan, cli, launch.
"""

"""Running probes on EPs: worker processes, the canary, pipelined probes, crashes and hangs.

Owns: starting workers (:mod:`.spawn`), one worker as the parent sees it (:mod:`.workers`),
whether an EP is live (:mod:`.canary`), the run's schedule (:mod:`.runner`), the probes it
shares between EPs (:mod:`.probeset`), replies as observations (:mod:`.collect`), Ctrl-C and
SIGTERM (:mod:`.interrupt`), deliberately broken EPs (:mod:`.faults`) and the proof that every
probe catches them (:mod:`.selftest`).
May import: contract, worker, classify, catalog, matrix.
Imported by: providers, audit, conformance, report (the selftest table), scan, cli, launch.
"""

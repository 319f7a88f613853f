"""Built probes kept on disk, keyed by what they are computed from.

Owns: the probe cache (:mod:`.probecache`: the file of every built probe, its key, pruning of
stale keys), which the generated catalog's store and the conformance cases reuse, and the
indexed record file it is written in (:mod:`.index`: an offset table with a digest per
record, read one record at a time).
May import: contract, worker (the framing).
Imported by: catalog (the corpus store), run (the probe set), audit, cli.
"""

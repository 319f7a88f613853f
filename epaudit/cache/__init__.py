"""Built probes kept on disk, keyed by what they are computed from.

Owns: the probe cache (:mod:`.probecache`: the framed file of every built probe, its key,
pruning of stale keys), which the generated catalog's store and the conformance cases reuse.
May import: contract, worker (the framing).
Imported by: catalog (the corpus store), audit, cli.
"""

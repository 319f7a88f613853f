"""Built probes kept on disk, keyed by what they are computed from.

Owns: the probe cache (:mod:`.probecache`: the framed file of every built probe, its key,
pruning of stale keys), which the generated catalog's store and the conformance cases reuse,
and which cache files are believed (:mod:`.trust`: owned by this user, written by no one else).
May import: contract, worker (the framing), textenc (one-line warnings).
Imported by: catalog (the corpus store), audit, cli.
"""

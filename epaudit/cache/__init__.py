"""Built probes kept on disk, keyed by what they are computed from.

Owns: the probe cache (:mod:`.probecache`: the file of every built probe, its key, pruning of
stale keys), which the generated catalog's store and the conformance cases reuse, the
indexed record file it is written in (:mod:`.index`: an offset table with a digest per
record, read one record at a time), and which cache files are believed (:mod:`.trust`:
owned by this user, written by no one else).
May import: contract, worker (the framing), textenc (one-line warnings).
Imported by: catalog (the corpus store), run (the probe set), matrix (the document cache), audit, cli.
"""

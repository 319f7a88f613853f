"""Classification: an observation plus its probe's references -> one outcome.

Owns: the order of the checks (:mod:`.outcome`), comparing outputs with references and the
subject/control separation (:mod:`.compare`), and reading ORT's words (:mod:`.messages`).
May import: contract.
Imported by: catalog (separation self-check), run, audit, conformance, scan.
"""

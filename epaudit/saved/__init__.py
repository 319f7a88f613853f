"""Saved runs: read back validated, merged from many machines, compared, blessed.

Owns: reading a saved JSON report against its schema (:mod:`.read`), the fleet merge that
gates columns from many files (:mod:`.fleet`), what changed between two runs (:mod:`.diff`),
and rewriting the matrix from observations (:mod:`.bless`).
May import: epaudit (the version), contract, reference (the semantics version), catalog, matrix, gate,
cache (the onnx version), classify (the decision a saved cell is re-derived with), textenc (one-line messages).
Imported by: cli.
"""

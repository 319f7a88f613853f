"""The declared capability matrix (``capabilities.toml``, docs/matrix.md).

Owns: the matrix as data (:mod:`.model`), loading (:mod:`.load`), where a key is
(:mod:`.lines`), validation of the top level, gate and conformance (:mod:`.validate`), of
providers (:mod:`.providers`, with the preflight checks of :mod:`.preflight`) and of cells
(:mod:`.cells`, glob keys in :mod:`.globs`), and the ``onnx`` key (:mod:`.onnxkey`).
May import: contract (what makes a feature key a glob), catalog (the feature ids a key may name), cache (the cache directory: the parsed
document of a large matrix, :mod:`.doccache`; the onnx version), textenc (one-line messages).
Imported by: run, surface, providers, gate, audit, saved, conformance, scan, cli.
"""

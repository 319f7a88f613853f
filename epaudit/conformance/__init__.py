"""Conformance: the ONNX backend node tests, run per EP through a governed skip-list.

``cases`` generates and caches the test cases from the installed onnx; ``run`` runs
them on each EP through the probe workers and classifies each like a probe; ``gate``
judges the outcomes against the matrix's ``[[conformance.skip]]`` entries; ``filters``
audits an ORT-style ``onnx_backend_test_series_filters.jsonc`` skip-list.

The cases themselves come from the corpus module of the catalog
(:mod:`epaudit.catalog.corpus.cases`), which derives probes from the same corpus.

May import: contract, classify, catalog, matrix, run, gate, audit.
Imported by: report (the skip-list audit table), cli.
"""

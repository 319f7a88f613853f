"""What an EP registers, and how much of it the catalog probes.

Owns: reading an EP's kernels and operator schemas in a throw-away process
(:mod:`.registry`, a standalone script), the surface items and the registry cache
(:mod:`.kernels`), and coverage (:mod:`.coverage`, docs/surface.md).
May import: contract, catalog, matrix, cache (the trust rule for its registry cache).
Imported by: gate (claims), report, cli.
"""

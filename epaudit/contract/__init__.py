"""The contract every stage speaks: what a feature, probe, observation, outcome, finding and
run are.

Owns: the outcome and finding-kind enums (:mod:`.outcomes`, docs/outcomes-and-gates.md), the
probe contract (:mod:`.probes`: ``Feature``, ``Probe``, ``Case``, ``Tolerance``) and the
frozen result dataclasses (:mod:`.results`: ``Observation``, ``Classified``, ``Finding``,
``RunResult``), the store that keeps a run's cells with their evidence on disk
(:mod:`.cellstore`), and how a saved run is signed (:mod:`.signing`: HMAC-SHA256 over
canonical JSON, the results key).
May import: nothing of epaudit.
Imported by: every other stage except the worker.
"""

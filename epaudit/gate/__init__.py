"""Judging outcomes against declarations: findings, the verdict, the exit code.

Owns: the gate rules (:mod:`.rules`, docs/outcomes-and-gates.md "Gate rules") and the claims
layer that sets registered, claimed and observed side by side (:mod:`.claims`).
May import: contract, matrix, surface.
Imported by: audit, saved, conformance, cli.
"""

"""What an EP needs on this machine: its environment, a release's environment, the machine.

Owns: ``epaudit env create`` (:mod:`.envs`: WebGPU with lavapipe, QNN, OpenVINO), any
onnxruntime release as a CPU column (:mod:`.releases`), the virtual environments both make
(:mod:`.venv`) and the facts of the machine a run ran on (:mod:`.machine`).
May import: contract, matrix, run.
Imported by: cli.
"""

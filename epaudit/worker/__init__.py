"""The probe worker: runs models on one execution provider and reports what happened.

A standalone package: it imports only the standard library, ``onnxruntime`` and ``numpy``
(never onnx, never the rest of epaudit), so it runs under any interpreter that has *some*
onnxruntime package installed (onnxruntime-gpu, onnxruntime-webgpu, ...) even where neither
onnx nor epaudit is installed. The parent starts ``<python> -c BOOTSTRAP`` with this
folder's ``__init__.py`` (``epaudit/run/spawn.py``), which loads the folder as the package
``epaudit_worker`` and runs :func:`serve.main`; its modules import one another relatively
and nothing else of epaudit.

Owns: the message format (:mod:`.protocol`), the facts of the onnxruntime it runs under
(:mod:`.ortinfo`), plugin EP registration and device selection (:mod:`.plugins`), sessions,
placement and poisoned output buffers (:mod:`.sessions`), the deliberately broken EP hooks
that act inside the EP's process (:mod:`.faults`), and the request loop with its parent watch
(:mod:`.serve`).
May import: nothing of epaudit.
Imported by: run (starts and drives workers), cache (the framing), surface (the registry
script loads plugins and facts, in its own throw-away process).
"""

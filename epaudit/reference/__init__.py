"""Float64 reference math for the probed operators, written from the specs.

``gqa`` follows the ORT contrib-op documentation and CPU kernel of
``com.microsoft.GroupQueryAttention``; ``attention`` follows the ONNX ``Attention``
specification (opset 23/24) with the semantics recorded in :data:`SEMANTICS`.

May import: contract.
Imported by: catalog, audit, saved, report, scan, cli.
"""

#: The semantics version every report records: which rules the references follow.
SEMANTICS = "epaudit-attention-semantics/1: qk_matmul_output_mode per ONNX>=1.22 (0 QK*scale, 1 after softcap, 2 after mask/bias, 3 after softmax); softcap before mask; fully-masked query rows are zeros (onnx PR #8068 errata); GQA order QK*scale -> softcap -> +attention_bias -> causal/window mask -> softmax (ORT CPU kernel)"

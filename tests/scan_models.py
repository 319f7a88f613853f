"""Models laid out the way real exporters write them, for ``epaudit scan`` tests and
benchmarks (built with onnx.helper; weights are random, the layout is what matters).

* :func:`genai_decoder` — an LLM decoder as ONNX Runtime GenAI's model builder
  (``onnxruntime-genai/src/python/py/models/builder.py``) writes it: ``input_ids``,
  ``attention_mask`` and ``past_key_values.{i}.key/value`` inputs, ``seqlens_k`` and
  ``total_sequence_length`` computed from the attention mask (``ReduceSum - 1``, ``Shape``
  then ``Gather``, both cast to int32), ``SkipSimplifiedLayerNormalization``, 4-bit
  ``MatMulNBits`` projections, and per layer a ``GroupQueryAttention`` with rotary
  ``cos_cache``/``sin_cache`` initializers, ``position_ids`` and ``attention_bias``.
* :func:`opset23_decoder` — the ONNX ``Attention`` op of opset 23 with ``is_causal`` and
  past/present KV, as ``torch.onnx.export(dynamo=True)`` emits for SDPA.
* :func:`vision` — Conv, Relu, Resize (``mode``, ``coordinate_transformation_mode``) in an
  If branch, and a model-local function.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F16 = TensorProto.FLOAT16


def _init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def genai_decoder(layers: int = 2, heads: int = 8, kv_heads: int = 2, head: int = 64, *,
                  softcap: float = 50.0, bias: bool = True, position_ids: bool = True,
                  vocab: int = 64, seed: int = 0) -> onnx.ModelProto:
    """A GenAI-builder-style float16 decoder of ``layers`` layers (symbolic batch/sequence)."""
    rng = np.random.default_rng(seed)
    hidden = heads * head
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch_size", "total_sequence_length"])]
    if position_ids:
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64,
                                                    ["batch_size", "sequence_length"]))
    if bias:
        inputs.append(helper.make_tensor_value_info("attention_bias", F16,
                                                    ["batch_size", 1, "sequence_length", "total_sequence_length"]))
    outputs = [helper.make_tensor_value_info("logits", F16, ["batch_size", "sequence_length", vocab])]
    inits = [_init("model.embed_tokens.weight", rng.standard_normal((vocab, hidden)).astype(np.float16)),
             _init("cos_cache", rng.standard_normal((2048, head // 2)).astype(np.float16)),
             _init("sin_cache", rng.standard_normal((2048, head // 2)).astype(np.float16)),
             _init("one", np.array(1, dtype=np.int64)), _init("one_axes", np.array([1], dtype=np.int64))]
    nodes = [
        helper.make_node("Gather", ["model.embed_tokens.weight", "input_ids"], ["/model/embed_tokens/Gather/output_0"],
                         name="/model/embed_tokens/Gather"),
        helper.make_node("ReduceSum", ["attention_mask", "one_axes"], ["/model/attn_mask_reformat/ReduceSum/output_0"],
                         name="/model/attn_mask_reformat/attn_mask_subgraph/ReduceSum", keepdims=0),
        helper.make_node("Sub", ["/model/attn_mask_reformat/ReduceSum/output_0", "one"],
                         ["/model/attn_mask_reformat/Sub/output_0"], name="/model/attn_mask_reformat/attn_mask_subgraph/Sub"),
        helper.make_node("Cast", ["/model/attn_mask_reformat/Sub/output_0"], ["seqlens_k"],
                         name="/model/attn_mask_reformat/attn_mask_subgraph/Sub/Cast", to=TensorProto.INT32),
        helper.make_node("Shape", ["attention_mask"], ["/model/attn_mask_reformat/Shape/output_0"],
                         name="/model/attn_mask_reformat/attn_mask_subgraph/Shape"),
        helper.make_node("Gather", ["/model/attn_mask_reformat/Shape/output_0", "one"],
                         ["/model/attn_mask_reformat/Gather/output_0"],
                         name="/model/attn_mask_reformat/attn_mask_subgraph/Gather", axis=0),
        helper.make_node("Cast", ["/model/attn_mask_reformat/Gather/output_0"], ["total_seq_len"],
                         name="/model/attn_mask_reformat/attn_mask_subgraph/Gather/Cast", to=TensorProto.INT32),
    ]
    x = "/model/embed_tokens/Gather/output_0"
    skip = None
    block = 32

    def nbits(name: str, inp: str, k: int, n: int) -> str:
        blobs = k // block
        inits.append(_init(f"{name}.weight_Q4", rng.integers(0, 255, (n, blobs, block // 2), dtype=np.uint8)))
        inits.append(_init(f"{name}.weight_scales", (0.01 * rng.random(n * blobs)).astype(np.float16)))
        out = f"{name}/MatMul/output_0"
        nodes.append(helper.make_node("MatMulNBits", [inp, f"{name}.weight_Q4", f"{name}.weight_scales"], [out],
                                      name=f"{name}/MatMul", domain="com.microsoft", K=k, N=n, bits=4,
                                      block_size=block, accuracy_level=4))
        return out

    for i in range(layers):
        p = f"/model/layers.{i}"
        inputs += [helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", F16,
                                                 ["batch_size", kv_heads, "past_sequence_length", head])
                   for kv in ("key", "value")]
        outputs += [helper.make_tensor_value_info(f"present.{i}.{kv}", F16,
                                                  ["batch_size", kv_heads, "total_sequence_length", head])
                    for kv in ("key", "value")]
        inits.append(_init(f"model.layers.{i}.input_layernorm.weight", np.ones(hidden, np.float16)))
        ln = f"{p}/input_layernorm/output_0"
        ln_in = [x, skip, f"model.layers.{i}.input_layernorm.weight"] if skip else None
        if ln_in:
            nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", ln_in, [ln, "", "", f"{p}/input_layernorm/output_3"],
                                          name=f"{p}/input_layernorm/SkipLayerNorm", domain="com.microsoft", epsilon=1e-6))
            x = f"{p}/input_layernorm/output_3"
        else:
            nodes.append(helper.make_node("SimplifiedLayerNormalization", [x, f"model.layers.{i}.input_layernorm.weight"],
                                          [ln], name=f"{p}/input_layernorm/LayerNorm", axis=-1, epsilon=1e-6,
                                          stash_type=1))
        q = nbits(f"{p}/attn/q_proj", ln, hidden, hidden)
        k = nbits(f"{p}/attn/k_proj", ln, hidden, kv_heads * head)
        v = nbits(f"{p}/attn/v_proj", ln, hidden, kv_heads * head)
        gqa_in = [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", "seqlens_k", "total_seq_len",
                  "cos_cache", "sin_cache", "position_ids" if position_ids else "", "attention_bias" if bias else ""]
        while gqa_in[-1] == "":
            gqa_in.pop()
        attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "do_rotary": 1, "local_window_size": -1,
                 "rotary_interleaved": 0, "scale": 0.0}
        if softcap:
            attrs["softcap"] = softcap
        nodes.append(helper.make_node("GroupQueryAttention", gqa_in,
                                      [f"{p}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                                      name=f"{p}/attn/GroupQueryAttention", domain="com.microsoft", **attrs))
        o = nbits(f"{p}/attn/o_proj", f"{p}/attn/GroupQueryAttention/output_0", hidden, hidden)
        inits.append(_init(f"model.layers.{i}.post_attention_layernorm.weight", np.ones(hidden, np.float16)))
        post = f"{p}/post_attention_layernorm/output_0"
        nodes.append(helper.make_node("SkipSimplifiedLayerNormalization",
                                      [x, o, f"model.layers.{i}.post_attention_layernorm.weight"],
                                      [post, "", "", f"{p}/post_attention_layernorm/output_3"],
                                      name=f"{p}/post_attention_layernorm/SkipLayerNorm", domain="com.microsoft",
                                      epsilon=1e-6))
        x = f"{p}/post_attention_layernorm/output_3"
        gate = nbits(f"{p}/mlp/gate_proj", post, hidden, 2 * hidden)
        up = nbits(f"{p}/mlp/up_proj", post, hidden, 2 * hidden)
        nodes.append(helper.make_node("Sigmoid", [gate], [f"{p}/mlp/act_fn/Sigmoid/output_0"], name=f"{p}/mlp/act_fn/Sigmoid"))
        nodes.append(helper.make_node("Mul", [gate, f"{p}/mlp/act_fn/Sigmoid/output_0"], [f"{p}/mlp/act_fn/Mul/output_0"],
                                      name=f"{p}/mlp/act_fn/Mul"))
        nodes.append(helper.make_node("Mul", [f"{p}/mlp/act_fn/Mul/output_0", up], [f"{p}/mlp/Mul/output_0"],
                                      name=f"{p}/mlp/Mul"))
        skip = nbits(f"{p}/mlp/down_proj", f"{p}/mlp/Mul/output_0", 2 * hidden, hidden)
    inits.append(_init("model.norm.weight", np.ones(hidden, np.float16)))
    nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [x, skip, "model.norm.weight"], ["/model/norm/output_0"],
                                  name="/model/norm/SkipLayerNorm", domain="com.microsoft", epsilon=1e-6))
    lm = nbits("/lm_head", "/model/norm/output_0", hidden, vocab)
    nodes.append(helper.make_node("Identity", [lm], ["logits"], name="/lm_head/Identity"))
    graph = helper.make_graph(nodes, "main_graph", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="onnxruntime-genai")
    model.ir_version = 10
    return model


def opset23_decoder(layers: int = 2, heads: int = 4, kv_heads: int = 4, head: int = 32,
                    dtype=TensorProto.FLOAT, seed: int = 1) -> onnx.ModelProto:
    """A decoder with opset-23 ``Attention`` (4-D BNSH, ``is_causal=1``, past/present KV)."""
    rng = np.random.default_rng(seed)
    hidden = heads * head
    np_t = helper.tensor_dtype_to_np_dtype(dtype)
    inputs = [helper.make_tensor_value_info("hidden_states", dtype, ["batch", "seq", hidden])]
    outputs = [helper.make_tensor_value_info("out", dtype, ["batch", "seq", hidden])]
    inits = [_init("q_shape", np.array([0, 0, heads, head], np.int64)),
             _init("kv_shape", np.array([0, 0, kv_heads, head], np.int64)),
             _init("o_shape", np.array([0, 0, hidden], np.int64))]
    nodes = []
    x = "hidden_states"
    for i in range(layers):
        p = f"model.layers.{i}.self_attn"
        inputs += [helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", dtype,
                                                 ["batch", kv_heads, "past_seq", head]) for kv in ("key", "value")]
        outputs += [helper.make_tensor_value_info(f"present.{i}.{kv}", dtype,
                                                  ["batch", kv_heads, "total_seq", head]) for kv in ("key", "value")]
        heads_of = {"q": heads, "k": kv_heads, "v": kv_heads}
        bnsh = {}
        for t in "qkv":
            inits.append(_init(f"{p}.{t}_proj.weight", rng.standard_normal((hidden, heads_of[t] * head)).astype(np_t)))
            nodes.append(helper.make_node("MatMul", [x, f"{p}.{t}_proj.weight"], [f"{p}/{t}"], name=f"{p}/{t}_proj/MatMul"))
            nodes.append(helper.make_node("Reshape", [f"{p}/{t}", "q_shape" if t == "q" else "kv_shape"], [f"{p}/{t}_4d"],
                                          name=f"{p}/{t}/Reshape"))
            nodes.append(helper.make_node("Transpose", [f"{p}/{t}_4d"], [f"{p}/{t}_bnsh"], name=f"{p}/{t}/Transpose",
                                          perm=[0, 2, 1, 3]))
            bnsh[t] = f"{p}/{t}_bnsh"
        nodes.append(helper.make_node("Attention", [bnsh["q"], bnsh["k"], bnsh["v"], "", f"past_key_values.{i}.key",
                                                    f"past_key_values.{i}.value"],
                                      [f"{p}/attn_out", f"present.{i}.key", f"present.{i}.value"],
                                      name=f"{p}/Attention", is_causal=1))
        nodes.append(helper.make_node("Transpose", [f"{p}/attn_out"], [f"{p}/attn_bsnh"], name=f"{p}/out/Transpose",
                                      perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"{p}/attn_bsnh", "o_shape"], [f"{p}/attn_flat"], name=f"{p}/out/Reshape"))
        x = f"{p}/attn_flat"
    nodes.append(helper.make_node("Identity", [x], ["out"], name="out/Identity"))
    graph = helper.make_graph(nodes, "torch_jit", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="pytorch")
    model.ir_version = 10
    return model


def vision(seed: int = 2) -> onnx.ModelProto:
    """Conv -> Relu -> If(Resize | Identity) -> a model-local function (Mul + Add)."""
    rng = np.random.default_rng(seed)
    x = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, ["N", 3, 32, 32])
    cond = helper.make_tensor_value_info("upsample", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("features", TensorProto.FLOAT, None)
    inits = [_init("conv.weight", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
             _init("conv.bias", np.zeros(8, np.float32)),
             _init("scales", np.array([1, 1, 2, 2], np.float32))]
    resize = helper.make_node("Resize", ["relu_out", "", "scales"], ["resized"], name="/neck/Resize",
                              mode="linear", coordinate_transformation_mode="half_pixel", antialias=1)
    then_g = helper.make_graph([resize], "then", [], [helper.make_tensor_value_info("resized", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["relu_out"], ["same"], name="/neck/Identity")], "else", [],
                               [helper.make_tensor_value_info("same", TensorProto.FLOAT, None)])
    fn = helper.make_function("local.vision", "ScaleShift", ["X"], ["Y"],
                              [helper.make_node("Mul", ["X", "X"], ["sq"], name="/fn/Mul"),
                               helper.make_node("Add", ["sq", "X"], ["Y"], name="/fn/Add")],
                              [helper.make_opsetid("", 21)])
    nodes = [helper.make_node("Conv", ["pixel_values", "conv.weight", "conv.bias"], ["conv_out"], name="/stem/Conv",
                              pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
             helper.make_node("Relu", ["conv_out"], ["relu_out"], name="/stem/Relu"),
             helper.make_node("If", ["upsample"], ["neck_out"], name="/neck/If", then_branch=then_g, else_branch=else_g),
             helper.make_node("ScaleShift", ["neck_out"], ["features"], name="/head/ScaleShift", domain="local.vision")]
    graph = helper.make_graph(nodes, "vision", [x, cond], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("local.vision", 1)],
                              functions=[fn], producer_name="pytorch")
    model.ir_version = 10
    return model


def save_external(model: onnx.ModelProto, path, data_name: str = "model.onnx.data") -> None:
    """Save with every initializer over 1 KiB in one external file next to ``path``."""
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data_name, size_threshold=1024)


def gqa_node(*, heads: int = 8, kv_heads: int = 2, head: int = 64, dtype=F16, packed: bool = False,
             past: bool = True, rotary: bool = False, interleaved: bool = False, position_ids: bool = False,
             bias: tuple | None = None, sink: bool = False, **attrs) -> onnx.ModelProto:
    """One GroupQueryAttention node with the inputs asked for, shapes symbolic where a real
    model's are (batch, sequence), fixed where they are (heads, head size)."""
    hidden = heads * head
    ins = [("query", dtype, ["B", "S", (heads + 2 * kv_heads) * head if packed else hidden])]
    if not packed:
        ins += [("key", dtype, ["B", "S", kv_heads * head]), ("value", dtype, ["B", "S", kv_heads * head])]
    else:
        ins += [("", None, None), ("", None, None)]
    if past:
        ins += [("past_key", dtype, ["B", kv_heads, "P", head]), ("past_value", dtype, ["B", kv_heads, "P", head])]
    else:
        ins += [("", None, None), ("", None, None)]
    ins += [("seqlens_k", TensorProto.INT32, ["B"]), ("total_sequence_length", TensorProto.INT32, [])]
    inits = []
    if rotary:
        rng = np.random.default_rng(3)
        np_t = helper.tensor_dtype_to_np_dtype(dtype)
        inits += [_init("cos_cache", rng.standard_normal((512, head // 2)).astype(np_t)),
                  _init("sin_cache", rng.standard_normal((512, head // 2)).astype(np_t))]
        ins += [("cos_cache", "init", None), ("sin_cache", "init", None)]
        attrs.update(do_rotary=1)
        if interleaved:
            attrs.update(rotary_interleaved=1)
    else:
        ins += [("", None, None), ("", None, None)]
    ins.append(("position_ids", TensorProto.INT64, ["B", "S"]) if position_ids else ("", None, None))
    ins.append(("attention_bias", dtype, list(bias)) if bias else ("", None, None))
    ins.append(("head_sink", dtype, [heads]) if sink else ("", None, None))
    while ins[-1][0] == "":
        ins.pop()
    graph_inputs = [helper.make_tensor_value_info(n, t, s) for n, t, s in ins if n and t != "init"]
    node = helper.make_node("GroupQueryAttention", [n for n, _, _ in ins], ["output", "present_key", "present_value"],
                            name="/model/layers.0/attn/GroupQueryAttention", domain="com.microsoft",
                            num_heads=heads, kv_num_heads=kv_heads, **attrs)
    outs = [helper.make_tensor_value_info(o, dtype, None) for o in ("output", "present_key", "present_value")]
    graph = helper.make_graph([node], "gqa", graph_inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return model


def attention_node(*, heads: int = 4, kv_heads: int = 2, head: int = 32, rank: int = 4, dtype=TensorProto.FLOAT,
                   past: bool = False, mask: tuple | None = None, nonpad: bool = False, qk_output: bool = False,
                   opset: int = 23, **attrs) -> onnx.ModelProto:
    """One ONNX Attention node; ``mask`` is (element type, shape)."""
    def shape(n: int, s: str) -> list:
        return ["B", n, s, head] if rank == 4 else ["B", s, n * head]
    ins = [("Q", dtype, shape(heads, "S")), ("K", dtype, shape(kv_heads, "L")), ("V", dtype, shape(kv_heads, "L"))]
    ins.append(("attn_mask", mask[0], list(mask[1])) if mask else ("", None, None))
    if past:
        ins += [("past_key", dtype, ["B", kv_heads, "P", head]), ("past_value", dtype, ["B", kv_heads, "P", head])]
    else:
        ins += [("", None, None), ("", None, None)]
    ins.append(("nonpad_kv_seqlen", TensorProto.INT64, ["B"]) if nonpad else ("", None, None))
    while ins[-1][0] == "":
        ins.pop()
    if rank == 3:
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    outs = ["Y"] + (["present_key", "present_value"] if past or qk_output else []) + (["qk"] if qk_output else [])
    node = helper.make_node("Attention", [n for n, _, _ in ins], outs, name="/model/layers.0/self_attn/Attention", **attrs)
    graph = helper.make_graph([node], "attn", [helper.make_tensor_value_info(n, t, s) for n, t, s in ins if n],
                              [helper.make_tensor_value_info(o, dtype, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def tiny_cnn(c_in: int = 9, seed: int = 4) -> onnx.ModelProto:
    """A small exporter-style CNN (opset 17, symbolic batch): Conv(k3, pads 1) -> Relu ->
    Conv(k1) -> GlobalAveragePool -> Flatten -> Gemm -> Softmax, float32, weights inside."""
    rng = np.random.default_rng(seed)
    inits = [_init("c1.w", (0.3 * rng.standard_normal((8, c_in, 3, 3))).astype(np.float32)),
             _init("c1.b", rng.standard_normal(8).astype(np.float32)),
             _init("c2.w", (0.3 * rng.standard_normal((4, 8, 1, 1))).astype(np.float32)),
             _init("fc.w", rng.standard_normal((3, 4)).astype(np.float32)),
             _init("fc.b", rng.standard_normal(3).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["image", "c1.w", "c1.b"], ["c1"], name="/features/conv1/Conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c1"], ["r1"], name="/features/relu1/Relu"),
             helper.make_node("Conv", ["r1", "c2.w"], ["c2"], name="/features/conv2/Conv", kernel_shape=[1, 1]),
             helper.make_node("GlobalAveragePool", ["c2"], ["gap"], name="/pool/GlobalAveragePool"),
             helper.make_node("Flatten", ["gap"], ["flat"], name="/Flatten"),
             helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="/fc/Gemm", transB=1),
             helper.make_node("Softmax", ["logits"], ["probs"], name="/Softmax", axis=-1)]
    graph = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                                 ["batch", c_in, 6, 6])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="pytorch")
    model.ir_version = 8
    return model

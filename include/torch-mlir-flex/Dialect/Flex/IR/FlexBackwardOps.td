//===- FlexBackwardOps.td - flex.attention_backward --------*- tablegen -*-===//
//
// The gradient of flex.attention. Included by FlexOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_BACKWARD_OPS
#define TORCH_MLIR_FLEX_DIALECT_FLEX_BACKWARD_OPS

def Flex_AttentionBackwardOp : Flex_AttentionLikeOp<"attention_backward", [
    AttrSizedOperandSegments,
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<TilingInterface, [
        "getIterationDomain",
        "getLoopIteratorTypes",
        "getTiledImplementation",
        "getResultTilePosition",
        "generateScalarImplementation"]>,
    SingleBlock
  ]> {
  let summary = "Gradients of flex.attention (PyTorch's flex_attention_backward)";
  let description = [{
    Computes the gradients of one `flex.attention` with respect to query,
    key, value and (optionally) the tensors captured by `score_mod`, as
    PyTorch's `sdpa_dense_backward` does. Operands:

    - `ins(query, key, value, out, logsumexp, grad_out)`: `query`
      `[B, Hq, M, E]`, `key` `[Bkv, Hkv, N, E]`, `value` `[Bkv, Hkv, N, Ev]`
      (f32, f16 or bf16, all equal; `Bkv` is `B` or 1, `Hq` a multiple of
      `Hkv`), `out` and `grad_out` `[B, Hq, M, Ev]` (query's element type),
      `logsumexp` `[B, Hq, M]` f32 in log2 units (as flex.attention returns
      it).
    - `grad_logsumexp` (optional) `[B, Hq, M]` f32: the gradient with
      respect to the log2-unit logsumexp.
    - `captures`, `kv_blocks`, `full_kv_blocks`, `block_sizes`: as in
      flex.attention (the same keep rule: full || (partial && mask_mod)).
    - `outs(grad_query, grad_key, grad_value)`: the shapes of query, key and
      value, query's element type.
    - `capture_grads(...)` with `grad_captures [i0, i1, ...]`:
      `capture_grads[j]` has the shape and (float) element type of
      `captures[grad_captures[j]]`.

    Every init is accumulated into (`result = init + contributions`, like a
    linalg reduction): callers pass zero-filled inits.

    Regions: `score_mod` and `mask_mod` as in flex.attention (empty:
    identity / keep all). `joint` has arguments `(score: f32, b, h, q_idx,
    kv_idx: index, grad: f32)` and yields `grad_score: f32`, then for every
    capture gradient `j` one value (the capture's element type) and
    `rank(captures[grad_captures[j]])` indices: the contribution
    `capture_grads[j][idx...] += value`. Contributions at indices outside
    the tensor are skipped. An empty `joint` (allowed only without capture
    gradients) yields its `grad` argument.

    Per `(b, h, m)` with `bk = Bkv == 1 ? 0 : b`, `hk = h / G` (`G =
    kv_group_size`, default `Hq / Hkv`), regions seeing global indices
    (`offsets` `(B0, H0)` added, as in flex.attention):

    ```
    lse   = logsumexp[b, h, m] * ln2
    gl    = grad_logsumexp ? grad_logsumexp[b, h, m] / ln2 : 0
    delta = sum_e f32(grad_out[b, h, m, e]) * f32(out[b, h, m, e])
    for n:
      s    = scale * sum_e f32(query[b, h, m, e]) * f32(key[bk, hk, n, e])
      s'   = score_mod(s, b, h, m, n)
      keep = mask / block rule (as flex.attention)
      if keep:
        p   = lse == -inf ? 0 : exp(s' - lse)
        grad_value[bk, hk, n, :] += p * grad_out[b, h, m, :]
        dp  = sum_e f32(grad_out[b, h, m, e]) * f32(value[bk, hk, n, e])
        ds  = p * (dp - delta + gl)
        (gs, contributions...) = joint(s, b, h, m, n, ds)
        grad_query[b, h, m, :] += scale * gs * key[bk, hk, n, :]
        grad_key[bk, hk, n, :] += scale * gs * query[b, h, m, :]
        capture_grads[j][idx_j...] += value_j
    ```

    (A masked point contributes nothing; PyTorch's `ds` is 0 there.)
    Arithmetic is in f32. In the scalar reference, `grad_query` rows are
    accumulated in f32 and rounded once; `grad_key` and `grad_value`
    (which sum over rows and query heads) are stored in their element type
    after every update (each sum `old + x` is formed in f32, so f16/bf16
    gradients round once per update); capture gradients are added in their
    own element type.

    ```mlir
    %dq, %dk, %dv, %dbias = flex.attention_backward
        ins(%q, %k, %v, %out, %lse, %dout : tensor<1x4x16x8xf32>,
            tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x4x16x8xf32>,
            tensor<1x4x16xf32>, tensor<1x4x16x8xf32>)
        grad_logsumexp(%glse : tensor<1x4x16xf32>)
        captures(%bias : tensor<4x16xf32>)
        outs(%dq0, %dk0, %dv0 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>,
             tensor<1x2x16x8xf32>)
        capture_grads(%dbias0 : tensor<4x16xf32>) grad_captures [0]
        scale(0.353553385)
        score_mod {
        ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
          %x = tensor.extract %bias[%h, %n] : tensor<4x16xf32>
          %t = arith.addf %s, %x : f32
          flex.yield %t : f32
        } mask_mod {
        ^bb0(%b: index, %h: index, %m: index, %n: index):
          %c = arith.cmpi sge, %m, %n : index
          flex.yield %c : i1
        } joint {
        ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
          flex.yield %g, %g, %h, %n : f32, f32, index, index
        } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>,
             tensor<4x16xf32>
    ```

    Lowering. As a TilingInterface op its iteration domain is `(B, Hkv)`:
    a tile owns the grad_key / grad_value slices of its kv heads and the
    grad_query rows of their `G` query heads (query, out, grad_out,
    logsumexp are sliced to heads `[hk0 * G, (hk0 + Hkt) * G)`; key and
    value to the tile's kv heads; `N`, `M`, `E`, `Ev` stay whole). A
    dimension is `parallel` only when tiles never write the same element:
    `Hkv` iff there are no capture gradients, `B` iff moreover `Bkv == B`
    statically; otherwise `reduction` (tiles accumulate into shared
    elements and must run in sequence). `generateScalarImplementation`
    takes the induction variables `(b, hk)` on buffers and emits loops over
    the group's query heads, `m` and `n` (`flex-to-loops`).
    `flex-backward-to-flash` is the fast lowering (FA2: key blocks outer,
    block classification, vector kernels; docs/tiled-lowering.md): it runs
    the tiles in parallel, capture gradients included, by giving each tile
    its own f32 partial of every capture gradient and summing them after.
  }];

  let arguments = (ins
    AnyShaped:$query,
    AnyShaped:$key,
    AnyShaped:$value,
    AnyShaped:$out,
    AnyShaped:$logsumexp,
    AnyShaped:$grad_out,
    Optional<AnyShaped>:$grad_logsumexp,
    Variadic<AnyShaped>:$captures,
    Variadic<Index>:$offsets,
    Optional<AnyShaped>:$kv_num_blocks,
    Optional<AnyShaped>:$kv_indices,
    Optional<AnyShaped>:$full_kv_num_blocks,
    Optional<AnyShaped>:$full_kv_indices,
    AnyShaped:$grad_query,
    AnyShaped:$grad_key,
    AnyShaped:$grad_value,
    Variadic<AnyShaped>:$capture_grads,
    F32Attr:$scale,
    OptionalAttr<DenseI64ArrayAttr>:$grad_captures,
    OptionalAttr<I64Attr>:$kv_group_size,
    OptionalAttr<DenseI64ArrayAttr>:$block_sizes
  );
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region MaxSizedRegion<1>:$score_mod,
                        MaxSizedRegion<1>:$mask_mod,
                        MaxSizedRegion<1>:$joint);

  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value `,` $out `,` $logsumexp `,`
        $grad_out `:` type($query) `,` type($key) `,` type($value) `,`
        type($out) `,` type($logsumexp) `,` type($grad_out) `)`
    (`grad_logsumexp` `(` $grad_logsumexp^ `:` type($grad_logsumexp) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`offsets` `(` $offsets^ `)`)?
    (`kv_blocks` `(` $kv_num_blocks^ `,` $kv_indices `:`
        type($kv_num_blocks) `,` type($kv_indices) `)`)?
    (`full_kv_blocks` `(` $full_kv_num_blocks^ `,` $full_kv_indices `:`
        type($full_kv_num_blocks) `,` type($full_kv_indices) `)`)?
    (`block_sizes` $block_sizes^)?
    `outs` `(` $grad_query `,` $grad_key `,` $grad_value `:`
        type($grad_query) `,` type($grad_key) `,` type($grad_value) `)`
    (`capture_grads` `(` $capture_grads^ `:` type($capture_grads) `)`)?
    (`grad_captures` $grad_captures^)?
    `scale` `(` $scale `)`
    attr-dict
    (`score_mod` $score_mod^)?
    (`mask_mod` $mask_mod^)?
    (`joint` $joint^)?
    (`->` type($results)^)?
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;

  let extraClassDeclaration = [{
    // DestinationStyleOpInterface: grad_query, grad_key, grad_value, then
    // the capture gradients.
    ::mlir::MutableOperandRange getDpsInitsMutable();

    ::mlir::ShapedType getQueryType() {
      return ::llvm::cast<::mlir::ShapedType>(getQuery().getType());
    }
    ::mlir::ShapedType getKeyType() {
      return ::llvm::cast<::mlir::ShapedType>(getKey().getType());
    }
    ::mlir::ShapedType getValueType() {
      return ::llvm::cast<::mlir::ShapedType>(getValue().getType());
    }
    bool hasScoreMod() { return !getScoreMod().empty(); }
    bool hasMaskMod() { return !getMaskMod().empty(); }
    bool hasJoint() { return !getJoint().empty(); }
    bool hasBlockTensors() { return static_cast<bool>(getKvNumBlocks()); }
    bool hasFullBlockTensors() {
      return static_cast<bool>(getFullKvNumBlocks());
    }
    bool hasTensorSemantics();
    bool hasBufferSemantics();
    /// The indices into `captures` of the capture gradients (empty if none).
    ::llvm::ArrayRef<int64_t> getGradCaptureIndices() {
      if (auto a = getGradCapturesAttr())
        return a.asArrayRef();
      return {};
    }

    /// The GQA ratio Hq / Hkv (or the kv_group_size attribute).
    int64_t getGroupSize();
  }];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_BACKWARD_OPS

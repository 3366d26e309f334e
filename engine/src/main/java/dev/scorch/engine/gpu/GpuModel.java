package dev.scorch.engine.gpu;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.model.WeightLayout;
import dev.scorch.engine.runtime.PackedBatch;

/**
 * DeepseekV3ForCausalLM on a {@link Device}: the same forward pass as {@code DeepseekV3Model}, with the weights
 * resident on the device (linears and the embedding table in the {@link GemmPrecision}'s dtype, the router gate
 * always in fp32 so expert choice matches the CPU's) and activations kept there between kernels. YaRN cos/sin
 * come from the CPU's {@link Rope}.
 *
 * <p>One forward runs at a time per model (the device has one stream and one scratch arena): callers on
 * several threads (Spark tasks sharing an executor's GPU) take turns.
 */
public final class GpuModel implements AutoCloseable {
  private final ModelConfig config;
  private final Device dev;
  private final GemmPrecision precision;
  private final Buf embedTokens; // [vocab, hidden]: rows are looked up (gathered), never multiplied
  private final Layer[] layers;
  private final Buf norm; // [hidden]
  private final Buf lmHead; // [vocab, hidden]
  private final Rope rope;
  private final float softmaxScale;
  private final RouterShape router;
  private final long weightBytes;
  private final Arena floats;
  private final Arena ints;
  private final java.util.List<Buf> owned = new java.util.ArrayList<>(); // every weight and vector uploaded
  private Buf cosSin; // [positions, qk_rope_head_dim]
  private int cosSinPositions;

  /** gate_up_proj: gate_proj and up_proj stacked, [2 · intermediate, hidden]. */
  record Mlp(Buf gateUpProj, Buf downProj, int intermediate) {}

  record Moe(Buf gate, Buf eScoreCorrectionBias, Mlp[] experts, Mlp sharedExperts) {}

  /**
   * qkvAProj: q_a_proj (or q_proj when q_lora_rank is null) and kv_a_proj_with_mqa stacked, [qOut + kv_lora_rank +
   * qk_rope_head_dim, hidden], one GEMM over the normed input; qBProj and qALayernorm are null without q_lora_rank.
   */
  record Attention(Buf qkvAProj, int qOut, Buf qALayernorm, Buf qBProj, Buf kvALayernorm, Buf kvBProj, Buf oProj) {}

  record Layer(Buf inputLayernorm, Attention selfAttn, Buf postAttentionLayernorm, Mlp mlp, Moe moe) {}

  private GpuModel(ModelWeights w, Device dev, GemmPrecision precision) {
    this.config = w.config();
    this.dev = dev;
    this.precision = precision;
    long before = dev.freeBytes();
    embedTokens = lin(w, "model.embed_tokens");
    layers = new Layer[config.numHiddenLayers()];
    for (int i = 0; i < layers.length; i++) {
      layers[i] = layer(w, i);
    }
    norm = up(w.vector("model.norm.weight"));
    lmHead = lin(w, "lm_head");
    weightBytes = before - dev.freeBytes();
    rope = new Rope(config);
    softmaxScale = Rope.softmaxScale(config);
    router = RouterShape.of(config);
    floats = new Arena(dev, Buf.Kind.F32, 1 << 20);
    ints = new Arena(dev, Buf.Kind.I32, 1 << 16);
  }

  /** Uploads the model's weights to dev. */
  public static GpuModel load(ModelWeights w, Device dev, GemmPrecision precision) {
    return new GpuModel(w, dev, precision);
  }

  private Layer layer(ModelWeights w, int i) {
    String p = WeightLayout.layer(i);
    String a = p + "self_attn.";
    Linear kvA = w.linear(a + "kv_a_proj_with_mqa.weight");
    Buf kvALayernorm = up(w.vector(a + "kv_a_layernorm.weight"));
    Attention attn = config.hasQLora()
        ? new Attention(own(dev.weight(precision, w.linear(a + "q_a_proj.weight"), kvA)), config.qLoraRank(),
            up(w.vector(a + "q_a_layernorm.weight")), lin(w, a + "q_b_proj"), kvALayernorm, lin(w, a + "kv_b_proj"), lin(w, a + "o_proj"))
        : new Attention(own(dev.weight(precision, w.linear(a + "q_proj.weight"), kvA)), config.numAttentionHeads() * config.qHeadDim(),
            null, null, kvALayernorm, lin(w, a + "kv_b_proj"), lin(w, a + "o_proj"));
    Mlp mlp = null;
    Moe moe = null;
    String m = p + "mlp.";
    if (config.isMoeLayer(i)) {
      Mlp[] experts = new Mlp[config.nRoutedExperts()];
      for (int e = 0; e < experts.length; e++) {
        experts[e] = mlp(w, m + "experts." + e + ".");
      }
      moe = new Moe(own(dev.weight(GemmPrecision.FP32, w.linear(m + "gate.weight"))), up(w.vector(m + "gate.e_score_correction_bias")),
          experts, config.nSharedExperts() > 0 ? mlp(w, m + "shared_experts.") : null);
    } else {
      mlp = mlp(w, m);
    }
    return new Layer(up(w.vector(p + "input_layernorm.weight")), attn, up(w.vector(p + "post_attention_layernorm.weight")),
        mlp, moe);
  }

  private Buf lin(ModelWeights w, String name) {
    return own(dev.weight(precision, w.linear(name + ".weight")));
  }

  private Buf up(float[] v) {
    return own(dev.upload(v));
  }

  private Buf own(Buf b) {
    owned.add(b);
    return b;
  }

  private Mlp mlp(ModelWeights w, String prefix) {
    Linear gate = w.linear(prefix + "gate_proj.weight");
    return new Mlp(own(dev.weight(precision, gate, w.linear(prefix + "up_proj.weight"))), lin(w, prefix + "down_proj"), gate.out());
  }

  public ModelConfig config() {
    return config;
  }

  public Device device() {
    return dev;
  }

  public GemmPrecision precision() {
    return precision;
  }

  /** Device bytes the weights took. */
  public long weightBytes() {
    return weightBytes;
  }

  /** Device bytes of the scratch arenas now. */
  public long scratchBytes() {
    return floats.bytes() + ints.bytes();
  }

  /** A KV cache for one sequence of up to capacity tokens. */
  public GpuKvCache newCache(int capacity) {
    return new GpuKvCache(dev, config.numHiddenLayers(), capacity, config.kvLoraRank() + config.qkRopeHeadDim());
  }

  /**
   * Runs the decoder over batch and passes the final-normed hidden states [T, hidden] (device scratch, valid
   * until the next call) to then. caches, when not null, holds one cache per sequence, positions numbered from
   * its length; every token's latent and k_pe are appended and each sequence attends over its whole cache.
   * routes, when not null, is [moe layer][T * top_k] and receives each token's experts.
   */
  public synchronized <R> R forward(PackedBatch batch, GpuKvCache[] caches, int[][] routes, java.util.function.Function<Buf, R> then) {
    floats.reset();
    ints.reset();
    int t = batch.numTokens();
    int hidden = config.hiddenSize();
    // x [T, hidden] = embed_tokens[tokens]
    for (int id : batch.tokens()) {
      if (id < 0 || id >= config.vocabSize()) {
        throw new IllegalArgumentException("token id " + id + " is outside the vocabulary [0, " + config.vocabSize() + ")");
      }
    }
    Buf tokens = ints.take(t);
    dev.write(tokens, batch.tokens(), 0, t);
    Buf x = floats.take((long) t * hidden);
    dev.gatherRows(embedTokens, tokens, t, hidden, x);
    Batch b = batch(batch, caches);
    int moeIndex = 0;
    for (int l = 0; l < layers.length; l++) {
      Layer layer = layers[l];
      long floatMark = floats.mark(); // this layer's scratch goes back once its output is in x
      long intMark = ints.mark();
      // h = input_layernorm(x); x += self_attn(h)
      Buf h = floats.take((long) t * hidden);
      dev.rmsNorm(x, t, hidden, 0, hidden, layer.inputLayernorm(), (float) config.rmsNormEps(), h);
      dev.add(x, attention(l, layer.selfAttn(), h, b, caches), (long) t * hidden);
      // h = post_attention_layernorm(x); x += mlp(h) or moe(h)
      dev.rmsNorm(x, t, hidden, 0, hidden, layer.postAttentionLayernorm(), (float) config.rmsNormEps(), h);
      Buf m;
      if (layer.moe() != null) {
        int[] r = routes == null ? null : (routes[moeIndex] = new int[t * config.numExpertsPerTok()]);
        m = moe(layer.moe(), h, t, r);
        moeIndex++;
      } else {
        m = mlp(layer.mlp(), h, t);
      }
      dev.add(x, m, (long) t * hidden);
      floats.release(floatMark);
      ints.release(intMark);
    }
    if (caches != null) {
      for (int s = 0; s < caches.length; s++) {
        caches[s].advance(batch.seqLen()[s]);
      }
    }
    Buf out = floats.take((long) t * hidden);
    dev.rmsNorm(x, t, hidden, 0, hidden, norm, (float) config.rmsNormEps(), out);
    return then.apply(out);
  }

  /** Positions and each query's key range, on the device. */
  private record Batch(PackedBatch packed, Buf positions, Buf keyStart, Buf keyLen, Buf tiles, int numTiles, int keys, int[] keyOffset) {}

  private Batch batch(PackedBatch batch, GpuKvCache[] caches) {
    int t = batch.numTokens();
    int n = batch.numSequences();
    if (caches != null && caches.length != n) {
      throw new IllegalArgumentException(n + " sequences but " + caches.length + " caches");
    }
    int[] keyStart = new int[t];
    int[] keyLen = new int[t];
    int[] keyOffset = new int[n]; // first key row of sequence s
    int keys = 0;
    int maxPos = 0;
    for (int s = 0; s < n; s++) {
      int past = caches == null ? 0 : caches[s].length();
      if (caches != null) {
        caches[s].checkRoom(batch.seqLen()[s]);
      }
      keyOffset[s] = caches == null ? batch.seqStart()[s] : keys;
      for (int i = 0; i < batch.seqLen()[s]; i++) {
        int row = batch.seqStart()[s] + i;
        int pos = batch.positions()[row];
        if (pos != past + i) {
          throw new IllegalArgumentException("sequence " + s + " token " + i + " has position " + pos + ", expected " + (past + i));
        }
        keyStart[row] = keyOffset[s];
        keyLen[row] = past + i + 1; // causal: the cache, then new tokens up to this one
        maxPos = Math.max(maxPos, pos);
      }
      keys += past + batch.seqLen()[s];
    }
    ensureCosSin(maxPos + 1);
    Buf positions = ints.take(t);
    dev.write(positions, batch.positions(), 0, t);
    Buf ks = ints.take(t);
    dev.write(ks, keyStart, 0, t);
    Buf kl = ints.take(t);
    dev.write(kl, keyLen, 0, t);
    // Attention tiles: runs of up to ATTENTION_TILE consecutive queries of one sequence.
    int[] tiles = new int[2 * (t + n)];
    int numTiles = 0;
    for (int s = 0; s < n; s++) {
      for (int i = 0; i < batch.seqLen()[s]; i += Device.ATTENTION_TILE) {
        tiles[2 * numTiles] = batch.seqStart()[s] + i;
        tiles[2 * numTiles++ + 1] = Math.min(Device.ATTENTION_TILE, batch.seqLen()[s] - i);
      }
    }
    Buf tb = ints.take(2L * numTiles);
    dev.write(tb, tiles, 0, 2 * numTiles);
    return new Batch(batch, positions, ks, kl, tb, numTiles, caches == null ? t : keys, keyOffset);
  }

  private void ensureCosSin(int positions) {
    if (positions <= cosSinPositions) {
      return;
    }
    int n = Math.max(positions, Math.max(4096, 2 * cosSinPositions));
    int dim = config.qkRopeHeadDim();
    float[] table = new float[n * dim];
    float[] cs = new float[dim];
    for (int p = 0; p < n; p++) {
      rope.cosSin(p, cs);
      System.arraycopy(cs, 0, table, p * dim, dim);
    }
    if (cosSin != null) {
      dev.free(cosSin);
    }
    cosSin = dev.upload(table);
    cosSinPositions = n;
  }

  /** Multi-head latent attention of h [T, hidden] → [T, hidden]. */
  private Buf attention(int layer, Attention a, Buf h, Batch b, GpuKvCache[] caches) {
    int t = b.packed().numTokens();
    int hidden = config.hiddenSize();
    int heads = config.numAttentionHeads();
    int qkNope = config.qkNopeHeadDim();
    int qkRope = config.qkRopeHeadDim();
    int vHead = config.vHeadDim();
    int qHead = qkNope + qkRope;
    int kvLora = config.kvLoraRank();
    float loraEps = (float) ModelConfig.LORA_NORM_EPS;
    // One GEMM for both low-rank projections: qkvA [T, qOut + kv_lora_rank + qk_rope] = [q_a | latent | k_pe]
    int kvAWidth = kvLora + qkRope;
    int width = a.qOut() + kvAWidth;
    Buf qkvA = floats.take((long) t * width);
    dev.gemm(h, t, hidden, a.qkvAProj(), width, qkvA, precision);
    // q = q_b_proj(q_a_layernorm(q_a)) or q_proj(h): [T, heads, q_head_dim] = [q_nope | q_pe]
    Buf q = floats.take((long) t * heads * qHead);
    if (a.qBProj() != null) {
      int qLora = a.qOut();
      Buf qA = floats.take((long) t * qLora);
      dev.rmsNorm(qkvA, t, width, 0, qLora, a.qALayernorm(), loraEps, qA);
      dev.gemm(qA, t, qLora, a.qBProj(), heads * qHead, q, precision);
    } else {
      dev.copyCols(qkvA, t, width, 0, heads * qHead, q, heads * qHead, 0);
    }
    // Only the latent is normed: latent [T, kv_lora_rank]; k_pe [T, qk_rope] is one rotary key head shared by all heads.
    Buf latent = floats.take((long) t * kvLora);
    dev.rmsNorm(qkvA, t, width, a.qOut(), kvLora, a.kvALayernorm(), loraEps, latent);
    Buf kPe = floats.take((long) t * qkRope);
    dev.copyCols(qkvA, t, width, a.qOut() + kvLora, qkRope, kPe, qkRope, 0);
    // RoPE on q_pe of every head and on k_pe, at each token's position.
    dev.rope(q, t, heads, heads * qHead, qHead, qkNope, qkRope, b.positions(), cosSin);
    dev.rope(kPe, t, 1, qkRope, 0, 0, qkRope, b.positions(), cosSin);
    // Keys: this batch's tokens, or each sequence's whole cache once the new tokens are appended to it.
    Buf keyLatent = latent;
    Buf keyPe = kPe;
    if (caches != null) {
      keyLatent = floats.take((long) b.keys() * kvLora);
      keyPe = floats.take((long) b.keys() * qkRope);
      PackedBatch p = b.packed();
      for (int s = 0; s < caches.length; s++) {
        GpuKvCache c = caches[s];
        int w = c.width();
        int past = c.length();
        int len = p.seqLen()[s];
        Buf rows = c.layer(layer);
        Buf fresh = rows.slice((long) past * w, (long) len * w);
        dev.copyCols(latent.slice((long) p.seqStart()[s] * kvLora, (long) len * kvLora), len, kvLora, 0, kvLora, fresh, w, 0);
        dev.copyCols(kPe.slice((long) p.seqStart()[s] * qkRope, (long) len * qkRope), len, qkRope, 0, qkRope, fresh, w, kvLora);
        int all = past + len;
        dev.copyCols(rows, all, w, 0, kvLora, keyLatent.slice((long) b.keyOffset()[s] * kvLora, (long) all * kvLora), kvLora, 0);
        dev.copyCols(rows, all, w, kvLora, qkRope, keyPe.slice((long) b.keyOffset()[s] * qkRope, (long) all * qkRope), qkRope, 0);
      }
    }
    // kv = kv_b_proj(latent of every key): [keys, heads, qk_nope + v_head] = [k_nope | v]
    Buf kv = floats.take((long) b.keys() * heads * (qkNope + vHead));
    dev.gemm(keyLatent, b.keys(), kvLora, a.kvBProj(), heads * (qkNope + vHead), kv, precision);
    Buf attn = floats.take((long) t * heads * vHead); // [T, heads, v_head]
    dev.mlaAttention(q, kv, keyPe, b.keyStart(), b.keyLen(), b.tiles(), b.numTiles(), t, heads, qkNope, qkRope, vHead, softmaxScale, attn);
    Buf out = floats.take((long) t * hidden);
    dev.gemm(attn, t, heads * vHead, a.oProj(), hidden, out, precision);
    return out;
  }

  /** SwiGLU MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), x [rows, hidden] → [rows, hidden]. */
  private Buf mlp(Mlp m, Buf x, int rows) {
    int hidden = config.hiddenSize();
    int inter = m.intermediate();
    Buf gu = floats.take((long) rows * 2 * inter); // [rows, gate | up]
    dev.gemm(x, rows, hidden, m.gateUpProj(), 2 * inter, gu, precision);
    Buf act = floats.take((long) rows * inter);
    dev.swiglu(gu, rows, inter, act);
    Buf out = floats.take((long) rows * hidden);
    dev.gemm(act, rows, inter, m.downProj(), hidden, out, precision);
    return out;
  }

  /**
   * Routed experts weighted by the router, plus the shared experts: x [T, hidden] → [T, hidden]. The routing comes
   * back to the host to group tokens per expert; experts run in ascending id order, each one GEMM chain over its
   * tokens, so every token's sum has the CPU's order.
   */
  private Buf moe(Moe moe, Buf x, int t, int[] routes) {
    int hidden = config.hiddenSize();
    int nExperts = config.nRoutedExperts();
    int topK = config.numExpertsPerTok();
    Buf logits = floats.take((long) t * nExperts); // [T, n_routed_experts], fp32 weights
    dev.gemm(x, t, hidden, moe.gate(), nExperts, logits, precision);
    Buf expertsBuf = ints.take((long) t * topK);
    Buf weightsBuf = floats.take((long) t * topK);
    dev.moeRoute(logits, moe.eScoreCorrectionBias(), t, router, expertsBuf, weightsBuf);
    int[] experts = new int[t * topK];
    float[] weights = new float[t * topK];
    dev.read(expertsBuf, experts, 0, experts.length);
    dev.read(weightsBuf, weights, 0, weights.length);
    if (routes != null) {
      System.arraycopy(experts, 0, routes, 0, experts.length);
    }
    // Slots: each (token, choice) pair, grouped by expert in ascending id, tokens in order within an expert. The
    // experts hit are the groups of two grouped GEMMs; each group gets the same number of slots (the busiest
    // expert's count: padding a device may compute and nobody reads) when the device batches groups, unless that would
    // more than double them.
    int[] count = new int[nExperts];
    for (int e : experts) {
      count[e]++;
    }
    int groups = 0;
    int capacity = 0;
    for (int c : count) {
      groups += c > 0 ? 1 : 0;
      capacity = Math.max(capacity, c);
    }
    boolean padded = dev.batchesGroups() && (long) groups * capacity <= 2L * t * topK;
    int[] groupStart = new int[groups];
    int[] groupRows = new int[groups];
    Buf[] gateUp = new Buf[groups];
    Buf[] down = new Buf[groups];
    int[] start = new int[nExperts];
    int slots = 0;
    for (int e = 0, g = 0; e < nExperts; e++) {
      if (count[e] > 0) {
        start[e] = slots;
        groupStart[g] = slots;
        groupRows[g] = count[e];
        gateUp[g] = moe.experts()[e].gateUpProj();
        down[g++] = moe.experts()[e].downProj();
        slots += padded ? capacity : count[e];
      }
    }
    int[] slotRow = new int[slots]; // token of each slot (padding reads token 0)
    int[] slotOf = new int[t * topK]; // slot of each (token, choice)
    for (int i = 0; i < t; i++) {
      for (int k = 0; k < topK; k++) {
        int slot = start[experts[i * topK + k]]++;
        slotRow[slot] = i;
        slotOf[i * topK + k] = slot;
      }
    }
    Buf slotRowBuf = ints.take(slots);
    dev.write(slotRowBuf, slotRow, 0, slots);
    Buf slotOfBuf = ints.take(t * topK);
    dev.write(slotOfBuf, slotOf, 0, t * topK);
    int inter = config.moeIntermediateSize();
    Buf xs = floats.take((long) slots * hidden); // [slots, hidden]
    dev.gatherRows(x, slotRowBuf, slots, hidden, xs);
    Buf gu = floats.take((long) slots * 2 * inter); // [slots, gate | up]
    dev.gemmGrouped(xs, groupStart, groupRows, groups, hidden, gateUp, 2 * inter, gu, precision);
    Buf act = floats.take((long) slots * inter);
    dev.swiglu(gu, slots, inter, act);
    Buf ye = floats.take((long) slots * hidden); // [slots, hidden]
    dev.gemmGrouped(act, groupStart, groupRows, groups, inter, down, hidden, ye, precision);
    // y [T, hidden] = Σ_k weight[t, k] · ye[slot of (t, k)], experts in ascending id as the CPU sums them.
    Buf y = floats.take((long) t * hidden);
    dev.moeCombine(ye, slotOfBuf, weightsBuf, t, topK, hidden, y);
    if (moe.sharedExperts() != null) {
      dev.add(y, mlp(moe.sharedExperts(), x, t), (long) t * hidden);
    }
    return y;
  }

  /** A scratch mark: {@link #releaseScratch} gives back what was taken after it (a logits chunk once read). */
  long[] markScratch() {
    return new long[] {floats.mark(), ints.mark()};
  }

  void releaseScratch(long[] mark) {
    floats.release(mark[0]);
    ints.release(mark[1]);
  }

  /**
   * logits [rows, vocab] = lm_head(hidden rows[j]) and their log-softmax stats ({@link Device#logSoftmaxStats})
   * for the given rows of hidden [T, hidden], as device scratch of the current forward.
   */
  Buf[] logits(Buf hidden, int[] rowIds, int[] targets) {
    int rows = rowIds.length;
    int h = config.hiddenSize();
    int vocab = config.vocabSize();
    Buf idx = ints.take(rows);
    dev.write(idx, rowIds, 0, rows);
    Buf tg = ints.take(rows);
    dev.write(tg, targets, 0, rows);
    Buf x = floats.take((long) rows * h);
    dev.gatherRows(hidden, idx, rows, h, x);
    Buf logits = floats.take((long) rows * vocab);
    dev.gemm(x, rows, h, lmHead, vocab, logits, precision);
    Buf stats = floats.take(3L * rows);
    dev.logSoftmaxStats(logits, rows, vocab, tg, stats);
    return new Buf[] {logits, stats};
  }

  /**
   * Prefill or decode with caches: runs batch (positions from each cache's length), appends to the caches, and
   * returns the next-token logits [sequences, vocab] of each sequence's last token, in fp32.
   */
  public synchronized float[] nextTokenLogits(PackedBatch batch, GpuKvCache[] caches) {
    int n = batch.numSequences();
    int vocab = config.vocabSize();
    return forward(batch, caches, null, hidden -> {
      int[] last = new int[n];
      int[] none = new int[n];
      for (int s = 0; s < n; s++) {
        last[s] = batch.seqStart()[s] + batch.seqLen()[s] - 1;
        none[s] = -1;
      }
      Buf logits = logits(hidden, last, none)[0];
      float[] out = new float[n * vocab];
      dev.read(logits, out, 0, out.length);
      return out;
    });
  }

  /** Frees the weights and scratch, then closes the device. */
  @Override
  public synchronized void close() {
    for (Buf b : owned) {
      dev.free(b);
    }
    owned.clear();
    if (cosSin != null) {
      dev.free(cosSin);
    }
    floats.close();
    ints.close();
    dev.close();
  }
}

package dev.scorch.engine.generation;

import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.KvCache;
import dev.scorch.engine.sampling.Sampler;
import dev.scorch.engine.scoring.LogSoftmax;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;

/**
 * Continuous batching: sequences (request × sample) wait in order; those whose KV cache fits the memory budget
 * join the running batch (their prompts prefilled together), every step decodes one token for each running
 * sequence, and finished ones leave so waiting ones can join. A sequence's tokens depend only on its prompt,
 * parameters and seed: the engine is batch-invariant bit for bit and each draw comes from (seed, sample, step).
 */
public final class Generator {
  private final DeepseekV3Model model;
  private final Ops ops;
  private final long maxCacheBytes;
  private final Tokenizer tokenizer; // for stop strings; may be null

  /** One running or waiting sequence. */
  private static final class Seq {
    final int request;
    final int sample;
    final GenerationRequest req;
    final int[] out;
    final float[] lps;
    int generated;
    KvCache cache;
    Completion.FinishReason finish;
    int next = -1; // the token to feed at the next decode step

    Seq(int request, int sample, GenerationRequest req) {
      this.request = request;
      this.sample = sample;
      this.req = req;
      this.out = new int[req.maxNewTokens()];
      this.lps = new float[req.maxNewTokens()];
    }

    long cacheBytes(long perToken) {
      return perToken * (req.prompt().length + req.maxNewTokens());
    }
  }

  public Generator(DeepseekV3Model model, Ops ops, long maxCacheBytes, Tokenizer tokenizer) {
    this.model = model;
    this.ops = ops;
    this.maxCacheBytes = maxCacheBytes;
    this.tokenizer = tokenizer;
  }

  /** Completions per request, n each, in sample order. */
  public List<List<Completion>> generate(List<GenerationRequest> requests) {
    long perToken = KvCache.bytesPerToken(model.config());
    Deque<Seq> waiting = new ArrayDeque<>();
    List<Seq> all = new ArrayList<>();
    for (int r = 0; r < requests.size(); r++) {
      GenerationRequest req = requests.get(r);
      if (!req.stopStrings().isEmpty() && tokenizer == null) {
        throw new IllegalArgumentException("request " + r + " has stop strings but no tokenizer was given");
      }
      for (int s = 0; s < req.n(); s++) {
        Seq q = new Seq(r, s, req);
        if (q.cacheBytes(perToken) > maxCacheBytes) {
          throw new IllegalArgumentException("request " + r + ": its cache (" + q.cacheBytes(perToken) + " bytes) exceeds the budget "
              + maxCacheBytes);
        }
        waiting.add(q);
        all.add(q);
      }
    }
    List<Seq> running = new ArrayList<>();
    long used = 0;
    while (!waiting.isEmpty() || !running.isEmpty()) {
      // Admit waiting sequences while their caches fit, and prefill them together.
      List<Seq> joining = new ArrayList<>();
      while (!waiting.isEmpty() && used + waiting.peek().cacheBytes(perToken) <= maxCacheBytes) {
        Seq q = waiting.poll();
        q.cache = new KvCache(model.config(), q.req.prompt().length + q.req.maxNewTokens());
        used += q.cacheBytes(perToken);
        joining.add(q);
      }
      if (!joining.isEmpty()) {
        prefill(joining);
        running.addAll(joining);
      }
      // One decode step for every running sequence that still needs a token.
      List<Seq> stepping = new ArrayList<>();
      for (Seq q : running) {
        if (q.finish == null) {
          stepping.add(q);
        }
      }
      if (!stepping.isEmpty()) {
        int[] tokens = new int[stepping.size()];
        KvCache[] caches = new KvCache[stepping.size()];
        for (int i = 0; i < tokens.length; i++) {
          tokens[i] = stepping.get(i).next;
          caches[i] = stepping.get(i).cache;
        }
        float[] logits = model.decode(tokens, caches, ops);
        for (int i = 0; i < tokens.length; i++) {
          choose(stepping.get(i), logits, i * model.vocabSize());
        }
      }
      // Finished sequences leave and free their cache budget.
      for (var it = running.iterator(); it.hasNext(); ) {
        Seq q = it.next();
        if (q.finish != null) {
          used -= q.cacheBytes(perToken);
          q.cache = null;
          it.remove();
        }
      }
    }
    List<List<Completion>> out = new ArrayList<>();
    for (int r = 0; r < requests.size(); r++) {
      out.add(new ArrayList<>());
    }
    for (Seq q : all) {
      out.get(q.request).add(new Completion(Arrays.copyOf(q.out, q.generated), Arrays.copyOf(q.lps, q.generated), q.finish, q.sample));
    }
    return out;
  }

  /** Prefills the joining prompts in one packed batch and chooses each one's first token. */
  private void prefill(List<Seq> joining) {
    List<int[]> prompts = new ArrayList<>();
    List<KvCache> caches = new ArrayList<>();
    for (Seq q : joining) {
      prompts.add(q.req.prompt());
      caches.add(q.cache);
    }
    var batch = KvCache.pack(prompts, caches);
    float[] hidden = model.prefill(batch, caches.toArray(new KvCache[0]), ops);
    int h = model.config().hiddenSize();
    int vocab = model.vocabSize();
    float[] last = new float[joining.size() * h];
    for (int i = 0; i < joining.size(); i++) {
      int row = batch.seqStart()[i] + batch.seqLen()[i] - 1;
      System.arraycopy(hidden, row * h, last, i * h, h);
    }
    float[] logits = new float[joining.size() * vocab];
    model.logits(last, joining.size(), ops, logits);
    for (int i = 0; i < joining.size(); i++) {
      choose(joining.get(i), logits, i * vocab);
    }
  }

  /** Samples sequence q's next token from logits[off ..], records it, and decides whether q is done. */
  private void choose(Seq q, float[] logits, int off) {
    int vocab = model.vocabSize();
    int step = q.generated;
    int t = Sampler.sample(logits, off, vocab, q.req.params(), q.req.prompt(), Arrays.copyOf(q.out, step), q.sample, step);
    if (q.req.stopTokenIds().contains(t)) {
      q.finish = Completion.FinishReason.EOS;
      return;
    }
    q.out[step] = t;
    q.lps[step] = (float) (logits[off + t] - LogSoftmax.logSumExp(logits, off, vocab));
    q.generated++;
    q.next = t;
    if (!q.req.stopStrings().isEmpty() && cutAtStopString(q)) {
      q.finish = Completion.FinishReason.STOP;
    } else if (q.generated == q.req.maxNewTokens()) {
      q.finish = Completion.FinishReason.LENGTH;
    }
  }

  /**
   * When the text generated so far contains a stop string, drops the tokens from the one that completed it
   * on (the text is cut before the stop string, at token granularity) and returns true.
   */
  private boolean cutAtStopString(Seq q) {
    String text = tokenizer.decode(Arrays.copyOf(q.out, q.generated), false);
    for (String stop : q.req.stopStrings()) {
      if (!stop.isEmpty() && text.contains(stop)) {
        // Keep the longest prefix of tokens whose text does not yet contain the stop string.
        int keep = q.generated;
        while (keep > 0 && tokenizer.decode(Arrays.copyOf(q.out, keep), false).contains(stop)) {
          keep--;
        }
        q.generated = keep;
        return true;
      }
    }
    return false;
  }
}

package dev.scorch.engine.scoring;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Log-prob scoring that computes a context shared by several sequences once and extends its latent KV cache for each
 * of them: a multiple-choice question's choices, a few-shot prompt's examples. Plain scoring ({@link Scorer})
 * recomputes the context for every sequence.
 *
 * <p>Each sequence is cut by itself alone. Its context is [0, c) with c = scoreFrom - 1: the token before the first
 * scored one starts the tail [c, n), whose hidden states give the scored log-probs (c = 0, no context, when every
 * position's logits are asked for). With a {@link ScoreRequest#sharedPrefix} p inside the context, the context is two
 * blocks, [0, p) and [p, c); else one, [0, c). The first block is prefilled from an empty cache as scoring prefills it
 * (its latent rows are the bits plain scoring computes); the second block and the tail extend the cache of the blocks
 * before them (a prefill over a cache that {@link KvCache#extendAsPrefill extends as prefill}):
 * their rows attend over the cache in the absorbed form and multiply with prefill's GEMMs, which read each weight once
 * per block of rows. Sequences with the same block share its cache, computed once, and blocks are kept from batch to
 * batch (a few-shot prompt is computed once per task, not per batch) up to a byte budget. Since the cuts depend on the
 * sequence alone, its scores are the same bits whatever its batch mates, its batch's size or which blocks were kept. A
 * sequence with no context is scored exactly as {@link Scorer} scores it; others differ from it in rounding only (the
 * absorbed attention of the extending rows): tests bound the difference by 1e-4 per log-prob.
 */
public final class PrefixSharingScorer implements BatchScorer {
    /** Bytes of latent rows kept between batches by default. */
    public static final long DEFAULT_KEPT_BYTES = 512L << 20;

    private final DeepseekV3Model model;
    private final GpuStages cpu;
    private final LatentBlocks blocks;
    private final Workspace ws = new Workspace();
    private final ModelConfig config;

    public PrefixSharingScorer(DeepseekV3Model model, CpuOps ops) {
        this(model, ops, DEFAULT_KEPT_BYTES);
    }

    /** keptBytes: the latent rows kept between batches, at most (0 keeps none past a batch). */
    public PrefixSharingScorer(DeepseekV3Model model, CpuOps ops, long keptBytes) {
        this.model = model;
        this.cpu = model.on(ops);
        this.config = model.config();
        this.blocks = new LatentBlocks(
                config.numHiddenLayers(), config.kvLoraRank() + config.qkRopeHeadDim(), Math.max(0, keptBytes));
    }

    /** Where sequence r's context ends: the start of the tail computed for it alone. */
    static int contextEnd(ScoreRequest r) {
        return r.logits() == LogitsMode.ALL ? 0 : r.scoreFrom() - 1;
    }

    /** The ends of sequence r's context blocks: its shared prefix where it lies inside the context, then the context's. */
    static int[] blockEnds(ScoreRequest r) {
        int c = contextEnd(r);
        int p = r.sharedPrefix();
        return c == 0 ? new int[0] : p > 0 && p < c ? new int[] {p, c} : new int[] {c};
    }

    /** Bytes of latent rows kept between batches now. */
    public synchronized long keptBytes() {
        return blocks.keptBytes();
    }

    @Override
    public synchronized void score(List<ScoreRequest> requests, BatchScores into) {
        try {
            scoreBatch(requests, into);
        } catch (InternalError e) {
            throw model.readFault(e);
        } finally {
            blocks.trim();
        }
    }

    private void scoreBatch(List<ScoreRequest> requests, BatchScores out) {
        int b = requests.size();
        out.reset(requests, model.vocabSize());
        // Each sequence's blocks, and the last one (the root for a sequence without a context).
        LatentBlocks.Block[] last = new LatentBlocks.Block[b];
        List<List<LatentBlocks.Block>> missingByDepth = new ArrayList<>();
        Set<LatentBlocks.Block> listed = new HashSet<>(); // blocks have identity equality
        for (int s = 0; s < b; s++) {
            int[] t = requests.get(s).tokens();
            LatentBlocks.Block at = blocks.root();
            for (int end : blockEnds(requests.get(s))) {
                at = blocks.child(at, t, end);
                if (at.rows == null && listed.add(at)) {
                    while (missingByDepth.size() <= at.depth) {
                        missingByDepth.add(new ArrayList<>());
                    }
                    missingByDepth.get(at.depth).add(at);
                }
            }
            blocks.touch(at);
            last[s] = at;
        }
        // The blocks not kept yet, a depth at a time: each depth's blocks extend the caches of the one before.
        for (List<LatentBlocks.Block> depth : missingByDepth) {
            List<int[]> seqs = new ArrayList<>(depth.size());
            List<KvCache> caches = new ArrayList<>(depth.size());
            for (LatentBlocks.Block k : depth) {
                int[] t = k.tokens();
                KvCache cache = new KvCache(config, k.end).extendAsPrefill();
                if (!k.parent.isRoot()) {
                    blocks.fill(cache, k.parent);
                }
                seqs.add(t);
                caches.add(cache);
            }
            prefill(KvCache.pack(seqs, caches), caches.toArray(KvCache[]::new), (p, st, pass, h) -> {});
            for (int i = 0; i < depth.size(); i++) {
                blocks.keep(depth.get(i), caches.get(i));
            }
        }
        // The tails: each sequence's tokens from its context's end, over its blocks' cache.
        List<int[]> tails = new ArrayList<>(b);
        KvCache[] caches = new KvCache[b];
        for (int s = 0; s < b; s++) {
            int[] t = requests.get(s).tokens();
            LatentBlocks.Block k = last[s];
            caches[s] = new KvCache(config, t.length).extendAsPrefill();
            if (!k.isRoot()) {
                blocks.fill(caches[s], k);
            }
            tails.add(Arrays.copyOfRange(t, k.end, t.length));
        }
        PackedBatch batch = KvCache.pack(tails, List.of(caches));
        int[] from = new int[b]; // the tails' first positions
        for (int s = 0; s < b; s++) {
            from[s] = last[s].end;
        }
        int chunk = cpu.logitsChunkFloats();
        prefill(batch, caches, (p, st, pass, h) -> Scorer.accept(out, batch, from, chunk, st, pass, h, ws));
    }

    /** Runs batch over caches (one per sequence, extended) on the CPU model, then finish on its final hidden states. */
    private void prefill(PackedBatch batch, KvCache[] caches, GpuStages.Finish finish) {
        cpu.run(List.of(new GpuStages.Micro(batch, new LatentCache[][] {caches}, null)), finish);
    }
}

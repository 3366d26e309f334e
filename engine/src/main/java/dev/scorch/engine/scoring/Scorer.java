package dev.scorch.engine.scoring;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.model.Pass;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.Workspace;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Log-prob scoring of a batch of sequences in packed prefills, on any {@link GpuStages}: the CPU model ({@link
 * DeepseekV3Model#on}), a {@link GpuModel} or a {@link GpuPipeline} (one prefill per micro-batch of consecutive
 * sequences). On the last stage lm_head and the log-softmax stats (log-sum-exp, target logit, argmax) are computed for
 * the rows that need them only, a chunk of rows at a time ({@link GpuStages#logitsChunkFloats}), so a [tokens × vocab]
 * tensor never exists for the batch; only those stats come back to the host, plus whole logits rows where top-k or
 * logits were asked for (on the CPU read in place). Results go to a caller's {@link BatchScores}, and the scratch is
 * kept from batch to batch: steady scoring into a kept one allocates nothing per token.
 */
public final class Scorer implements BatchScorer {
    private static final Workspace.Slot<Scratch> SCRATCH = new Workspace.Slot<>(Scratch::new);

    private final GpuStages stages;
    // The scratch between calls; a call that finds it taken (another thread scoring) uses a fresh one.
    private final AtomicReference<Workspace> idle = new AtomicReference<>(new Workspace());

    /** A scorer on the CPU model, a {@link GpuModel}, a {@link GpuPipeline} or another chain of stages. */
    public Scorer(GpuStages stages) {
        this.stages = stages;
    }

    /** The one-device model scored on, or null when this scorer runs something else. */
    public GpuModel model() {
        return stages instanceof GpuModel m ? m : null;
    }

    /** What this scorer runs on. */
    public GpuStages stages() {
        return stages;
    }

    @Override
    public void score(List<ScoreRequest> requests, BatchScores into) {
        score(requests, null, into);
    }

    /** As {@link #score(List)}; routes ([moe layer][T * top_k]) receives every packed token's experts when not null. */
    public List<SequenceScore> score(List<ScoreRequest> requests, int[][] routes) {
        BatchScores scores = new BatchScores();
        score(requests, routes, scores);
        return scores.toList();
    }

    /** As {@link #score(List, BatchScores)}, with routes as in {@link #score(List, int[][])}. */
    public void score(List<ScoreRequest> requests, int[][] routes, BatchScores out) {
        Workspace ws = idle.getAndSet(null);
        if (ws == null) {
            ws = new Workspace();
        }
        try {
            score(requests, routes, ws.get(SCRATCH), out);
        } finally {
            idle.set(ws);
        }
    }

    private void score(List<ScoreRequest> requests, int[][] routes, Scratch s, BatchScores out) {
        out.reset(requests, stages.config().vocabSize());
        int n = requests.size();
        if (n == 0) {
            if (routes != null) {
                Arrays.fill(routes, new int[0]);
            }
            return;
        }
        int parts = Math.max(1, Math.min(n, stages.microBatches(n)));
        int[] cut = s.whole(n);
        if (parts > 1) {
            int[] lengths = new int[n];
            for (int q = 0; q < n; q++) {
                lengths[q] = requests.get(q).tokens().length;
            }
            cut = GpuStages.cuts(lengths, parts);
        }
        List<GpuStages.Micro> micro = s.micro;
        micro.clear();
        int[][][] microRoutes = new int[parts][][];
        for (int p = 0; p < parts; p++) {
            s.seqs.clear();
            for (int q = cut[p]; q < cut[p + 1]; q++) {
                s.seqs.add(requests.get(q).tokens());
            }
            if (routes != null) {
                microRoutes[p] = parts == 1 ? routes : new int[routes.length][];
            }
            // one batch: packed in the workspace's arrays
            PackedBatch batch = parts == 1 ? PackedBatch.of(s.seqs, s.ws) : PackedBatch.of(s.seqs);
            micro.add(new GpuStages.Micro(batch, null, microRoutes[p]));
        }
        s.seqs.clear();
        s.neededRows(out, cut, parts, stages.logitsChunkFloats());
        s.from = null;
        try {
            stages.run(micro, s);
        } finally {
            s.out = null;
            micro.clear();
        }
        if (routes != null && parts > 1) {
            for (int l = 0; l < routes.length; l++) {
                int len = 0;
                for (int[][] r : microRoutes) {
                    len += r[l].length;
                }
                routes[l] = new int[len];
                int at = 0;
                for (int[][] r : microRoutes) {
                    System.arraycopy(r[l], 0, routes[l], at, r[l].length);
                    at += r[l].length;
                }
            }
        }
    }

    /**
     * Scores out's needed positions from hidden, the final hidden states of batch on last (pass's forward), whose
     * sequence q holds the positions from[q] .. of out's sequence q: what {@link PrefixSharingScorer} runs after its
     * tails' prefill, chunks of at most chunkFloats logits, with the scratch in ws.
     */
    static void accept(
            BatchScores out,
            PackedBatch batch,
            int[] from,
            int chunkFloats,
            DecoderStage last,
            Pass pass,
            Buf hidden,
            Workspace ws) {
        Scratch s = ws.get(SCRATCH);
        s.micro.add(new GpuStages.Micro(batch, null, null));
        s.neededRows(out, s.whole(out.sequences()), 1, chunkFloats);
        s.from = from;
        try {
            s.apply(0, last, pass, hidden);
        } finally {
            s.out = null;
            s.micro.clear();
        }
    }

    /** A workspace's buffers for scoring, and the last stage's work on each micro-batch ({@link GpuStages.Finish}). */
    private static final class Scratch extends Workspace.Buffers implements GpuStages.Finish {
        private final Workspace ws;
        private final List<int[]> seqs = new ArrayList<>(); // the requests' token arrays, while packing
        private final List<GpuStages.Micro> micro = new ArrayList<>();
        private int[] cut; // [micro-batches + 1]: micro-batch p holds sequences [cut[p], cut[p + 1])
        private final int[] one = new int[2]; // the cut of one micro-batch
        private int[] neededSeq; // [rows needing logits], in sequence order
        private int[] neededPos;
        private int[] firstNeeded =
                new int[0]; // [micro-batches + 1]: micro-batch p's needed rows [first[p], first[p+1])
        private int[] rowIds; // [chunk]
        private int[] targets; // [chunk]
        private double[] stats; // [3 · chunk]
        private float[] rows; // [chunk, vocab], a device's whole logits rows on the host
        // this call's
        private BatchScores out;
        private int[] from; // sequence q's first position in its batch, or null: from 0
        private int chunk;

        Scratch(Workspace ws) {
            super(ws);
            this.ws = ws;
        }

        int[] whole(int n) {
            one[1] = n;
            return one;
        }

        /** Lists out's needed rows and where each micro-batch's start; chunks of at most chunkFloats logits. */
        void neededRows(BatchScores out, int[] cut, int parts, int chunkFloats) {
            this.out = out;
            this.cut = cut;
            int tokens = out.tokenStart(out.sequences());
            int[] seq = neededSeq = ints(neededSeq, tokens);
            int[] pos = neededPos = ints(neededPos, tokens);
            int needed = out.neededRows(seq, pos);
            int[] first = firstNeeded = ints(firstNeeded, parts + 1);
            for (int p = 0, j = 0; p < parts; p++) { // needed rows come in sequence order
                first[p] = j;
                while (j < needed && seq[j] < cut[p + 1]) {
                    j++;
                }
                first[p + 1] = j;
            }
            int vocab = out.vocab();
            chunk = Math.max(1, Math.min(needed, chunkFloats / vocab));
            rowIds = ints(rowIds, chunk);
            targets = ints(targets, chunk);
            stats = doubles(stats, 3 * chunk);
        }

        /** lm_head and the log-softmax stats of micro-batch p's needed rows, a chunk at a time. */
        @Override
        public void apply(int p, DecoderStage last, Pass pass, Buf hidden) {
            PackedBatch batch = micro.get(p).batch();
            int vocab = out.vocab();
            int seq0 = cut[p];
            int j1 = firstNeeded[p + 1];
            pass.mark();
            for (int c0 = firstNeeded[p]; c0 < j1; c0 += chunk) {
                int n = Math.min(chunk, j1 - c0);
                boolean wholeRows = false;
                for (int j = 0; j < n; j++) {
                    int q = neededSeq[c0 + j];
                    int pos = neededPos[c0 + j];
                    int offset = pos - (from == null ? 0 : from[q]);
                    if (offset < 0) {
                        throw new IllegalStateException("position " + pos + " of sequence " + q
                                + " needs logits but the batch holds it from " + from[q]);
                    }
                    rowIds[j] = batch.seqStart()[q - seq0] + offset;
                    targets[j] = out.target(q, pos);
                    wholeRows |= out.needsRow(q, pos);
                }
                Buf logits = last.logits(pass, hidden, rowIds, n);
                last.stats(pass, logits, n, targets, stats);
                float[] host = wholeRows ? (rows = pass.device().hostFloats(logits, n * vocab, rows)) : null;
                for (int j = 0; j < n; j++) {
                    out.accept(
                            neededSeq[c0 + j],
                            neededPos[c0 + j],
                            stats[3 * j],
                            (int) stats[3 * j + 2],
                            (float) stats[3 * j + 1],
                            host,
                            j * vocab);
                }
                pass.release(); // the next chunk reuses this one's scratch
            }
        }
    }
}

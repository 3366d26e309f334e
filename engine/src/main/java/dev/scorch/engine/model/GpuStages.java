package dev.scorch.engine.model;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * The model as a chain of {@link DecoderStage}s, each micro-batch run through them in order: a {@link GpuModel} (one
 * stage on one device) or a {@link GpuPipeline} (stages on several devices, working at once on different
 * micro-batches) or the CPU model ({@link DeepseekV3Model#on}). What {@code Scorer} and {@code StageDecodingModel} run
 * on; a pipeline whose stages are spread over several processes implements it too, its {@link #stages} being the local
 * ones.
 */
public interface GpuStages {
    /** The model's config, its stages': the first's. */
    default ModelConfig config() {
        return stages().get(0).config();
    }

    /** The stages in pipeline order: the first holds embed_tokens, the last model.norm and lm_head. */
    List<DecoderStage> stages();

    /**
     * How many micro-batches a call over this many sequences is best split into; 1 (run it whole) unless the stages
     * work at once on different micro-batches: one device gains nothing from splitting a batch.
     */
    default int microBatches(int sequences) {
        return 1;
    }

    /**
     * One micro-batch: its packed sequences, their KV caches [stage][sequence] ({@link #newCaches}) or null, routes
     * [MoE layer][T * top_k] to receive its tokens' experts, or null, and boundary, the per-layer clock of a {@link
     * DecoderStage.Request}, or null.
     */
    final class Micro {
        private final PackedBatch batch;
        private final LatentCache[][] caches;
        private final int[][] routes;
        private final IntConsumer boundary;
        // By stage, what it runs with nothing handed in, made once: a decode step's Micro serves every step of a
        // generation, so a step allocates none. (A race makes a second, equal request; requests are immutable.)
        private final DecoderStage.Request[] plain;

        public Micro(PackedBatch batch, LatentCache[][] caches, int[][] routes, IntConsumer boundary) {
            this.batch = batch;
            this.caches = caches;
            this.routes = routes;
            this.boundary = boundary;
            this.plain = new DecoderStage.Request[caches == null ? 1 : Math.max(1, caches.length)];
        }

        /** No clock. */
        public Micro(PackedBatch batch, LatentCache[][] caches, int[][] routes) {
            this(batch, caches, routes, null);
        }

        public PackedBatch batch() {
            return batch;
        }

        public LatentCache[][] caches() {
            return caches;
        }

        public int[][] routes() {
            return routes;
        }

        public IntConsumer boundary() {
            return boundary;
        }

        /** The caches of stage k's layers, one per sequence, or null. */
        public LatentCache[] stage(int k) {
            return caches == null ? null : caches[k];
        }

        /** What stage k runs of it, the incoming hidden states in from the host or handed on its device (or neither). */
        public DecoderStage.Request at(int k, float[] in, Buf handed) {
            if (in != null || handed != null || k >= plain.length) {
                return new DecoderStage.Request(batch, stage(k), routes, in, handed, boundary);
            }
            DecoderStage.Request r = plain[k];
            if (r == null) {
                r = new DecoderStage.Request(batch, stage(k), routes, null, null, boundary);
                plain[k] = r;
            }
            return r;
        }
    }

    /** What runs on the last stage with a micro-batch's final-normed hidden states [T, hidden]. */
    interface Finish {
        /** hidden is pass's scratch on the last stage, valid only during the call (read what is needed from it). */
        void apply(int micro, DecoderStage last, Pass pass, Buf hidden);
    }

    /** Runs every micro-batch through all the stages, then finish on the last stage, micro-batches in order at every stage. */
    void run(List<Micro> micro, Finish finish);

    /** Floats of logits a scorer computes at once on a device: 256 MiB of its memory. */
    int LOGITS_CHUNK_FLOATS = 64 << 20;

    /** Floats of logits a scorer computes at once at most. */
    default int logitsChunkFloats() {
        return LOGITS_CHUNK_FLOATS;
    }

    /** Bytes of the scratch kept between calls now. */
    default long scratchBytes() {
        long n = 0;
        for (DecoderStage st : stages()) {
            n += st.scratchBytes();
        }
        return n;
    }

    /** KV caches of every stage's layers for one sequence of up to capacity tokens, in stage order. */
    default LatentCache[] newCaches(int capacity) {
        List<DecoderStage> st = stages();
        GpuKvCache[] out = new GpuKvCache[st.size()];
        try {
            for (int k = 0; k < out.length; k++) {
                out[k] = st.get(k).newCache(capacity);
            }
        } catch (RuntimeException | Error e) {
            for (GpuKvCache c : out) {
                if (c != null) {
                    c.close();
                }
            }
            throw e;
        }
        return out;
    }

    /**
     * Runs micro on stages one after the other on the calling thread, the hidden states handed between stages
     * through the host in fp32 (exact).
     */
    static void runInOrder(List<DecoderStage> stages, List<Micro> micro, Finish finish) {
        int last = stages.size() - 1;
        for (int i = 0; i < micro.size(); i++) {
            Micro m = micro.get(i);
            float[] hidden = null;
            for (int k = 0; k < last; k++) {
                DecoderStage st = stages.get(k);
                hidden = st.forward(m.at(k, hidden, null), st::read);
            }
            DecoderStage st = stages.get(last);
            int index = i;
            st.forward(m.at(last, hidden, null), h -> {
                finish.apply(index, st, st.own(), h);
                return null;
            });
        }
    }

    /**
     * Cuts sequences of these lengths into at most parts contiguous runs of about equal tokens: returns the run
     * boundaries [0, ..., lengths.length] (run p is sequences [cut[p], cut[p + 1])), every run non-empty.
     */
    static int[] cuts(int[] lengths, int parts) {
        int n = lengths.length;
        int p = Math.max(1, Math.min(parts, n));
        long total = 0;
        for (int len : lengths) {
            total += len;
        }
        int[] cut = new int[p + 1];
        int s = 0;
        long sum = 0;
        for (int k = 1; k < p; k++) {
            long target = total * k / p;
            // at least one sequence per run, and enough left for the runs after this one
            do {
                sum += lengths[s++];
            } while (s < n - (p - k) && sum + lengths[s] / 2 < target);
            cut[k] = s;
        }
        cut[p] = n;
        return cut;
    }
}

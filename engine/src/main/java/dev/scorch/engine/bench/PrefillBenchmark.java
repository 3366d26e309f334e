package dev.scorch.engine.bench;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.HeapAllocation;
import dev.scorch.engine.runtime.ProcessMemory;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Times batched prefill scoring (forward pass + log-probs of every token) on random token ids: warm-up
 * runs, then timed runs; reports tokens/s (median, min, max), model FLOP/s, peak RSS, heap bytes allocated per token
 * (over all runs and in the median run)
 * (the scores go to one {@link BatchScores} kept from run to run) and the bytes of the scorer's activation workspace.
 */
public final class PrefillBenchmark {

    public record Result(
            int batch,
            int seq,
            int threads,
            int runs,
            double medianTokensPerSec,
            double minTokensPerSec,
            double maxTokensPerSec,
            double medianSeconds,
            double modelGflopPerSec,
            long peakRssBytes,
            double heapBytesPerToken,
            double heapBytesPerTokenMedianRun,
            long workspaceBytes) {}

    private PrefillBenchmark() {}

    public static Result run(DeepseekV3Model model, CpuOps ops, int batch, int seq, int warmup, int runs, long seed) {
        List<ScoreRequest> reqs = randomRequests(model.vocabSize(), batch, seq, seed);
        Scorer scorer = new Scorer(model.on(ops));
        BatchScores scores = new BatchScores(); // kept from run to run, as a scoring loop keeps it
        for (int i = 0; i < warmup; i++) {
            scorer.score(reqs, scores);
        }
        double[] secs = new double[runs];
        long[] runHeap = new long[runs];
        for (int i = 0; i < runs; i++) {
            long heap0 = HeapAllocation.allocatedBytes();
            long t0 = System.nanoTime();
            scorer.score(reqs, scores);
            secs[i] = (System.nanoTime() - t0) / 1e9;
            runHeap[i] = HeapAllocation.since(heap0);
        }
        long heapBytes = 0;
        for (long b : runHeap) {
            heapBytes += b;
        }
        Arrays.sort(secs);
        double median = runs % 2 == 1 ? secs[runs / 2] : (secs[runs / 2 - 1] + secs[runs / 2]) / 2;
        double tokens = (double) batch * seq;
        return new Result(
                batch,
                seq,
                ops.threads(),
                runs,
                tokens / median,
                tokens / secs[runs - 1],
                tokens / secs[0],
                median,
                modelFlops(model.config(), batch, seq) / median / 1e9,
                ProcessMemory.peakRssBytes(),
                heapBytes / (tokens * runs),
                HeapAllocation.medianRun(runHeap) / tokens,
                scorer.stages().scratchBytes());
    }

    /** batch sequences of seq uniformly random token ids, scored from the second token: the benchmarks' input. */
    public static List<ScoreRequest> randomRequests(int vocab, int batch, int seq, long seed) {
        SplittableRandom rnd = new SplittableRandom(seed);
        List<ScoreRequest> reqs = new ArrayList<>();
        for (int b = 0; b < batch; b++) {
            int[] t = new int[seq];
            for (int i = 0; i < seq; i++) {
                t[i] = rnd.nextInt(vocab);
            }
            reqs.add(ScoreRequest.of(t));
        }
        return reqs;
    }

    /**
     * FLOPs of one prefill: 2 × active matmul parameters × tokens (embedding rows are looked up, not
     * multiplied) plus causal attention: per layer and head, 2 × (q_head + v_head) per visible (query, key) pair.
     */
    public static double modelFlops(ModelConfig c, int batch, int seq) {
        double tokens = (double) batch * seq;
        double matmulParams = WeightLayout.activeParameters(c) - (double) c.vocabSize() * c.hiddenSize();
        double pairs = batch * (seq * (seq + 1.0) / 2);
        double attention = c.numHiddenLayers() * c.numAttentionHeads() * 2.0 * (c.qHeadDim() + c.vHeadDim()) * pairs;
        return 2 * matmulParams * tokens + attention;
    }
}

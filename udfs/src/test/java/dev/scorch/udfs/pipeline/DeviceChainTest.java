package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * A barrier stage spread over its node's devices: the node's layers split over 2 or 3 devices, run as a pipeline of
 * micro-batches, give the bits of the same layers on one device, for the hidden states a node hands on and for the
 * last node's scores; and the devices compute at once.
 */
class DeviceChainTest {
    private static final Path MODEL = Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model");

    @Test
    void aNodesLayersOverSeveralDevicesGiveOneDevicesBits() {
        ModelWeights w = ModelWeights.open(MODEL);
        int layers = w.config().numHiddenLayers(); // 3
        Random r = new Random(7);
        List<int[]> prompts = new ArrayList<>();
        List<ScoreRequest> requests = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            int[] p = new int[3 + r.nextInt(20)];
            for (int j = 0; j < p.length; j++) {
                p[j] = r.nextInt(w.config().vocabSize());
            }
            prompts.add(p);
            requests.add(new ScoreRequest(p, 1, 3, i == 0 ? LogitsMode.LAST : LogitsMode.NONE));
        }
        PackedBatch batch = PackedBatch.of(prompts);
        // Two nodes: [0, 1) then [1, 3), the last node's layers over 1 and 2 devices; one node of all three layers over
        // 1 and 3 devices.
        StageEngine first = chain(w, 0, 1, 1);
        float[] handed = first.forward(batch, null);
        BatchScores one = score(chain(w, 1, layers, 1), requests, batch, handed);
        BatchScores two = score(chain(w, 1, layers, 2), requests, batch, handed);
        assertEquals(2, chain(w, 1, layers, 2).stages().size());
        assertSame(one, two);
        BatchScores whole = score(chain(w, 0, layers, 1), requests, batch, null);
        BatchScores three = score(chain(w, 0, layers, 3), requests, batch, null);
        assertSame(whole, three);
        assertSame(whole, one); // the ring's hand-off between nodes keeps the bits too
        // The hidden states a node hands on: [0, 2) as the first node of a longer ring, over 1 and 2 devices; and a
        // node's layers after the first, from the hidden states handed to it, over 1 and 2 devices.
        assertArrayEquals(
                chain(w, 0, 2, 1).forward(batch, null), chain(w, 0, 2, 2).forward(batch, null));
        assertArrayEquals(
                chain(w, 1, layers, 1).forward(batch, handed),
                chain(w, 1, layers, 2).forward(batch, handed));
    }

    @Test
    void aNodesDevicesWorkAtOnce() {
        ModelWeights w = ModelWeights.open(MODEL);
        Random r = new Random(11);
        List<int[]> prompts = new ArrayList<>();
        List<ScoreRequest> requests = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            int[] p = r.ints(8 + r.nextInt(24), 0, w.config().vocabSize()).toArray();
            prompts.add(p);
            requests.add(new ScoreRequest(p, 1, 0, LogitsMode.NONE));
        }
        PackedBatch batch = PackedBatch.of(prompts);
        StageCache.DeviceChain three = chain(w, 0, w.config().numHiddenLayers(), 3);
        BatchScores got = score(three, requests, batch, null);
        assertTrue(
                three.pipeline().maxConcurrentStages() >= 2,
                "at most " + three.pipeline().maxConcurrentStages() + " device(s) computed at once");
        assertSame(score(chain(w, 0, w.config().numHiddenLayers(), 1), requests, batch, null), got);
    }

    private static StageCache.DeviceChain chain(ModelWeights w, int first, int end, int devices) {
        List<DecoderStage> stages = new ArrayList<>();
        for (int d = 0; d < devices; d++) {
            int[] sub = PipelinePartition.layers(end - first, devices, d);
            stages.add(DecoderStage.load(w, new HostDevice(), GemmPrecision.BF16X3, first + sub[0], first + sub[1]));
        }
        return new StageCache.DeviceChain(stages);
    }

    private static BatchScores score(StageEngine e, List<ScoreRequest> requests, PackedBatch batch, float[] in) {
        BatchScores out = new BatchScores();
        e.score(requests, batch, in, out);
        return out;
    }

    private static void assertSame(BatchScores a, BatchScores b) {
        assertArrayEquals(a.tokenLogprobs(), b.tokenLogprobs());
        assertArrayEquals(a.topLogprobs(), b.topLogprobs());
        assertArrayEquals(a.logits(), b.logits());
    }
}

package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.runtime.PackedBatch;
import org.junit.jupiter.api.Test;

/**
 * A decode step reuses its {@link GpuStages.Micro} step after step; the request a stage runs with nothing handed in is
 * made once, so a step allocates none (it was a decode step's only allocation: 40 bytes a token at batch 1).
 */
class MicroTest {
    private static final PackedBatch ONE = new PackedBatch(new int[1], new int[1], new int[1], new int[] {1});

    @Test
    void aStageAskedWithNothingHandedInGetsTheSameRequestEachStep() {
        LatentCache[][] caches = new LatentCache[2][1];
        int[][] routes = new int[3][8];
        GpuStages.Micro m = new GpuStages.Micro(ONE, caches, routes);
        for (int k = 0; k < 2; k++) {
            DecoderStage.Request r = m.at(k, null, null);
            assertSame(r, m.at(k, null, null), "stage " + k);
            assertSame(ONE, r.batch());
            assertSame(caches[k], r.caches(), "stage " + k + "'s caches: the array refilled each step");
            assertSame(routes, r.routes());
            assertNull(r.in());
        }
        assertNotSame(m.at(0, null, null), m.at(1, null, null));
    }

    @Test
    void hiddenStatesHandedInMakeARequestOfTheirOwn() {
        GpuStages.Micro m = new GpuStages.Micro(ONE, null, null);
        float[] in = new float[4];
        DecoderStage.Request r = m.at(0, in, null);
        assertSame(in, r.in());
        assertNotSame(r, m.at(0, in, null));
        assertNull(m.at(0, null, null).in());
        assertNull(m.at(0, null, null).caches());
    }
}

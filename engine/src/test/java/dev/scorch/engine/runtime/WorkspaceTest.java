package dev.scorch.engine.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class WorkspaceTest {
    /** A user's scratch as the model's modules declare theirs: a field per buffer. */
    static final class Scratch extends Workspace.Buffers {
        float[] a;
        float[] b;
        int[] ints;
        float[][] rows;

        Scratch(Workspace ws) {
            super(ws);
        }
    }

    private static final Workspace.Slot<Scratch> SCRATCH = new Workspace.Slot<>(Scratch::new);
    private static final Workspace.Slot<Scratch> OTHER = new Workspace.Slot<>(Scratch::new);

    @Test
    void aBufferGrowsToTheLargestSizeAskedAndIsThenReused() {
        Workspace ws = new Workspace();
        Scratch s = ws.get(SCRATCH);
        float[] small = s.a = s.floats(s.a, 10);
        assertEquals(10, small.length, "a fresh workspace hands out exactly the size asked");
        float[] large = s.a = s.floats(s.a, 100);
        assertNotSame(small, large);
        assertSame(large, s.a = s.floats(s.a, 40), "a smaller request reuses the larger buffer");
        assertSame(large, s.a = s.floats(s.a, 100));
        s.b = s.floats(s.b, 100);
        assertEquals(4L * 100 + 4L * 100, ws.bytes(), "what the buffers hold now, not what they held before");
        Scratch o = ws.get(OTHER);
        o.a = o.floats(o.a, 50);
        o.ints = o.ints(o.ints, 3);
        assertEquals(4L * 100 + 4L * 100 + 4L * 50 + 4L * 3, ws.bytes(), "every scratch counts");
    }

    @Test
    void zerosClearsWhatAnEarlierPassLeft() {
        Scratch s = new Workspace().get(SCRATCH);
        float[] f = s.a = s.floats(s.a, 8);
        java.util.Arrays.fill(f, 3f);
        float[] z = s.a = s.zeros(s.a, 5);
        assertSame(f, z);
        for (int i = 0; i < 5; i++) {
            assertEquals(0f, z[i]);
        }
        assertEquals(3f, z[5], "only the n asked are cleared");
        int[] a = s.ints = s.ints(s.ints, 4);
        java.util.Arrays.fill(a, 7);
        assertEquals(0, s.intZeros(s.ints, 4)[3]);
    }

    @Test
    void exactBuffersHaveExactlyTheSizeAsked() {
        Workspace ws = new Workspace();
        Scratch s = ws.get(SCRATCH);
        float[] f = s.a = s.exactFloats(s.a, 16);
        assertSame(f, s.a = s.exactFloats(s.a, 16));
        assertEquals(8, (s.a = s.exactFloats(s.a, 8)).length);
        assertEquals(4L * 8, ws.bytes());
    }

    @Test
    void rowGroupsGrowPerRowAndKeepTheirRows() {
        Scratch s = new Workspace().get(SCRATCH);
        float[][] r = s.rows = s.floatRows(s.rows, 2, 4);
        float[] first = r[0];
        float[][] more = s.rows = s.floatRows(s.rows, 3, 4);
        assertEquals(3, more.length);
        assertSame(first, more[0], "rows that are large enough are kept");
        float[][] wider = s.rows = s.floatRows(s.rows, 2, 9);
        assertTrue(wider.length >= 2 && wider[0].length == 9 && wider[1].length == 9);
        assertEquals(4, wider[2].length, "rows past count are left as they were");
    }

    @Test
    void exactGroupArraysAreKeptPerLengthSoAlternatingSizesReuseThem() {
        // A decode step runs the dense layer's MLP as a group of one and each MoE layer's as a group of five, with the
        // same scratch: both sizes must stay, or every layer would reallocate them.
        Workspace.ByLength<int[]> ints = new Workspace.ByLength<>(int[]::new);
        int[] one = ints.get(1);
        int[] five = ints.get(5);
        assertEquals(1, one.length);
        assertEquals(5, five.length);
        assertSame(one, ints.get(1));
        assertSame(five, ints.get(5));
        assertEquals(0, ints.get(0).length);
        Workspace.ByLength<String[]> strings = new Workspace.ByLength<>(String[]::new);
        String[] s2 = strings.get(2);
        String[] s7 = strings.get(7);
        assertEquals(7, s7.length);
        assertSame(s2, strings.get(2));
        assertSame(s7, strings.get(7));
    }

    @Test
    void aScratchIsMadeOncePerWorkspaceAndSlot() {
        Workspace ws = new Workspace();
        Scratch s = ws.get(SCRATCH);
        assertSame(s, ws.get(SCRATCH));
        assertNotSame(s, ws.get(OTHER), "each slot has its own");
        assertNotSame(s, new Workspace().get(SCRATCH), "each workspace has its own");
    }
}

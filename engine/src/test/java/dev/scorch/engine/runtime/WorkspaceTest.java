package dev.scorch.engine.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;

class WorkspaceTest {
    /** A user's scratch as the model's modules declare theirs: a field per buffer. */
    static final class Scratch extends Workspace.Buffers {
        float[] a;
        float[] b;
        int[] ints;

        Scratch(Workspace ws) {
            super(ws);
        }
    }

    /** A scratch that holds memory the workspace did not grow (as the CPU model's device arenas). */
    static final class DeviceScratch extends Workspace.Buffers {
        long held;

        DeviceScratch(Workspace ws) {
            super(ws);
        }

        @Override
        protected long otherBytes() {
            return held;
        }
    }

    private static final Workspace.Slot<Scratch> SCRATCH = new Workspace.Slot<>(Scratch::new);
    private static final Workspace.Slot<Scratch> OTHER = new Workspace.Slot<>(Scratch::new);
    private static final Workspace.Slot<DeviceScratch> DEVICE = new Workspace.Slot<>(DeviceScratch::new);

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
    void exactBuffersHaveExactlyTheSizeAsked() {
        Workspace ws = new Workspace();
        Scratch s = ws.get(SCRATCH);
        float[] f = s.a = s.exactFloats(s.a, 16);
        assertSame(f, s.a = s.exactFloats(s.a, 16));
        assertEquals(8, (s.a = s.exactFloats(s.a, 8)).length);
        assertEquals(4L * 8, ws.bytes());
    }

    @Test
    void whatAScratchHoldsElsewhereIsCountedToo() {
        Workspace ws = new Workspace();
        Scratch s = ws.get(SCRATCH);
        s.a = s.floats(s.a, 10);
        ws.get(DEVICE).held = 1000; // a device's arenas, grown outside the workspace's methods
        assertEquals(4L * 10 + 1000, ws.bytes());
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

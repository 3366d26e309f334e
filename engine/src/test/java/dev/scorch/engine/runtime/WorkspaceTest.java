package dev.scorch.engine.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class WorkspaceTest {
    private static final Workspace.Key A = new Workspace.Key("a");
    private static final Workspace.Key B = new Workspace.Key("b");

    @Test
    void aBufferGrowsToTheLargestSizeAskedAndIsThenReused() {
        Workspace ws = new Workspace();
        float[] small = ws.floats(A, 10);
        assertEquals(10, small.length, "a fresh workspace hands out exactly the size asked");
        float[] large = ws.floats(A, 100);
        assertNotSame(small, large);
        assertSame(large, ws.floats(A, 40), "a smaller request reuses the larger buffer");
        assertSame(large, ws.floats(A, 100));
        assertNotSame(large, ws.floats(B, 100), "each key names its own buffer");
        assertEquals(4L * 100 + 4L * 100, ws.bytes());
    }

    @Test
    void zerosClearsWhatAnEarlierPassLeft() {
        Workspace ws = new Workspace();
        float[] f = ws.floats(A, 8);
        java.util.Arrays.fill(f, 3f);
        float[] z = ws.zeros(A, 5);
        assertSame(f, z);
        for (int i = 0; i < 5; i++) {
            assertEquals(0f, z[i]);
        }
        assertEquals(3f, z[5], "only the n asked are cleared");
        int[] a = ws.ints(B, 4);
        java.util.Arrays.fill(a, 7);
        assertEquals(0, ws.intZeros(B, 4)[3]);
    }

    @Test
    void exactBuffersHaveExactlyTheSizeAsked() {
        Workspace ws = new Workspace();
        float[] f = ws.exactFloats(A, 16);
        assertSame(f, ws.exactFloats(A, 16));
        assertEquals(8, ws.exactFloats(A, 8).length);
    }

    @Test
    void rowGroupsGrowPerRowAndKeepTheirRows() {
        Workspace ws = new Workspace();
        float[][] r = ws.floatRows(A, 2, 4);
        float[] first = r[0];
        float[][] more = ws.floatRows(A, 3, 4);
        assertEquals(3, more.length);
        assertSame(first, more[0], "rows that are large enough are kept");
        float[][] wider = ws.floatRows(A, 2, 9);
        assertTrue(wider.length >= 2 && wider[0].length == 9 && wider[1].length == 9);
        assertEquals(4, wider[2].length, "rows past count are left as they were");
    }

    @Test
    void exactGroupArraysAreKeptPerLengthSoAlternatingSizesReuseThem() {
        // A decode step runs the dense layer's MLP as a group of one and each MoE layer's as a group of five, under
        // the same keys: both sizes must stay, or every layer would reallocate them.
        Workspace ws = new Workspace();
        int[] one = ws.exactInts(A, 1);
        int[] five = ws.exactInts(A, 5);
        assertEquals(1, one.length);
        assertEquals(5, five.length);
        assertSame(one, ws.exactInts(A, 1));
        assertSame(five, ws.exactInts(A, 5));
        assertEquals(0, ws.exactInts(A, 0).length);
        String[] s2 = ws.exactArray(B, 2, String[]::new);
        String[] s7 = ws.exactArray(B, 7, String[]::new);
        assertEquals(7, s7.length);
        assertSame(s2, ws.exactArray(B, 2, String[]::new));
        assertSame(s7, ws.exactArray(B, 7, String[]::new));
    }

    @Test
    void anObjectIsMadeOncePerWorkspace() {
        Workspace ws = new Workspace();
        StringBuilder sb = ws.object(A, StringBuilder::new);
        assertSame(sb, ws.object(A, StringBuilder::new));
        assertNotSame(sb, new Workspace().object(A, StringBuilder::new));
    }
}

package dev.scorch.engine.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The forward pass's scratch: released slices are reused, and a pass that outgrew its block gets one block of its peak. */
class ArenaTest {
    @Test
    void releaseReusesAndResetMergesToThePeak() {
        HostDevice dev = new HostDevice();
        Arena a = new Arena(dev, Buf.Kind.F32, 1000);
        Buf x = a.take(300); // held all pass, like the residual stream
        long mark = a.mark();
        Buf layer1 = a.take(600);
        a.release(mark);
        Buf layer2 = a.take(600);
        assertSame(layer1.storage(), layer2.storage());
        assertEquals(layer1.offset(), layer2.offset(), "the second layer reuses the first one's scratch");
        a.release(mark);
        Buf big = a.take(5000); // a layer that outgrows the block: a second block serves it
        assertTrue(big.storage() != x.storage());
        assertEquals((1000 + 5056) * 4L, a.bytes(), "the first block of 1000 and a new one of 5000 rounded to 64");
        a.reset();
        // One block of the high-water mark: the first block in full plus the 5000-element layer.
        assertEquals((1000 + 5056) * 4L, a.bytes());
        Buf again = a.take(300);
        a.take(5000);
        assertEquals((1000 + 5056) * 4L, a.bytes(), "the same pass now fits one block");
        assertSame(again.storage(), a.take(1).storage());
        a.close();
        assertEquals(dev.totalBytes(), dev.freeBytes(), "every block freed");
    }
}

package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.cpu.CpuDevice;
import dev.scorch.engine.device.host.HostDevice;
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

    @Test
    void onTheCpuEachSliceIsAWholeArrayReusedByItsPlaceInThePass() {
        CpuDevice dev = new CpuDevice(null); // memory only
        Arena a = new Arena(dev, Buf.Kind.F32, 1000);
        Buf x = a.take(300);
        long mark = a.mark();
        Buf layer1 = a.take(600);
        Buf layer1b = a.take(10);
        a.release(mark);
        Buf layer2 = a.take(500);
        assertEquals(0, x.offset());
        assertEquals(0, layer2.offset(), "the CPU kernels take arrays from their start");
        assertSame(layer1.storage(), layer2.storage(), "the layer's first slice reuses the last layer's first");
        assertEquals(500, layer2.length());
        Buf grown = a.take(20); // the second slice of this layer is larger than the last layer's: a new array
        assertTrue(grown.storage() != layer1b.storage());
        assertEquals(20, ((float[]) grown.storage()).length);
        a.reset();
        assertSame(x.storage(), a.take(300).storage(), "the next pass reuses them in order");
        assertEquals((300 + 600 + 20) * 4L, a.bytes());
    }

    @Test
    void onTheCpuASliceOfALengthTakenBeforeIsTheSameBufferSoAPassAllocatesNothing() {
        Arena a = new Arena(new CpuDevice(null), Buf.Kind.F32, 1000);
        long mark = a.mark();
        Buf dense = a.take(600); // a dense layer's first slice
        a.release(mark);
        Buf moe = a.take(400); // an MoE layer's, at the same place
        a.release(mark);
        assertSame(dense, a.take(600), "the dense layer's view is kept beside the MoE layer's");
        a.release(mark);
        assertSame(moe, a.take(400));
        a.reset();
        assertSame(dense, a.take(600), "and from pass to pass");
    }
}

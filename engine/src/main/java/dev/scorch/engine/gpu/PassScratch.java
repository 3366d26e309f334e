package dev.scorch.engine.gpu;

import dev.scorch.engine.kernels.Rope;

/**
 * What a forward pass takes on one device and keeps for the next: float and int scratch {@link Arena}s and the YaRN
 * cos/sin table. One pass uses it at a time: a GPU stage holds one (its device runs one pass at a time), the CPU model
 * one per workspace (each of the engine's concurrent passes has its own).
 */
public final class PassScratch implements AutoCloseable {
    private final Device dev;
    final Arena floats;
    final Arena ints;
    private Buf cosSin; // [positions, qk_rope_head_dim]
    private int positions;

    public PassScratch(Device dev) {
        this.dev = dev;
        floats = new Arena(dev, Buf.Kind.F32, 1 << 20);
        ints = new Arena(dev, Buf.Kind.I32, 1 << 16);
    }

    public Device device() {
        return dev;
    }

    /** cos/sin of positions [0, n) at least, grown by doubling (from 4,096) so a generation grows it a few times. */
    Buf cosSin(Rope rope, int n) {
        if (n > positions) {
            int grown = Math.max(n, Math.max(4096, 2 * positions));
            cosSin = dev.ropeTable(rope, grown, cosSin);
            positions = grown;
        }
        return cosSin;
    }

    /** Bytes of the arenas now. */
    public long bytes() {
        return floats.bytes() + ints.bytes();
    }

    @Override
    public void close() {
        if (cosSin != null) {
            dev.free(cosSin);
            cosSin = null;
            positions = 0;
        }
        floats.close();
        ints.close();
    }
}

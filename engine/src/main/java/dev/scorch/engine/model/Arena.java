package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import java.util.ArrayList;
import java.util.List;

/**
 * Scratch memory for one forward pass: slices taken in order from device blocks of one element kind.
 * {@link #mark}/{@link #release} give back everything taken since the mark (a layer's scratch, once its output is
 * added into the residual stream; a logits chunk once read), so a pass holds one layer's scratch at a time;
 * {@link #reset} gives back everything. When a pass needs more than the blocks hold, another block serves it, and
 * the next reset replaces them all with one block of the pass's high-water mark, so steady state allocates nothing.
 * On a device whose kernels take whole arrays ({@link Device#slicesScratch} false: the CPU's) each slice is an
 * allocation of its own, the i-th taken since the last mark reusing the one taken i-th before while it is long enough,
 * and its views of the last few lengths taken (a dense layer and an MoE layer take different sizes at one index), so
 * steady state allocates nothing there either.
 */
final class Arena implements AutoCloseable {
    private static final long ALIGN = 64; // elements: 256-byte aligned slices for the GEMMs

    private final Device dev;
    private final Buf.Kind kind;
    private final List<Buf> blocks = new ArrayList<>();
    private int current; // block the next slice comes from
    private long used; // elements taken from blocks[current]
    private long peak; // high-water mark since the last reset: blocks before current in full, plus used
    private final boolean whole; // one allocation per slice: blocks[i] serves the i-th slice, current the next
    private static final int VIEWS = 4; // whole: views kept per slice
    private final List<Buf[]> views = new ArrayList<>(); // whole: the i-th slice's views, the latest first
    private long allocations; // allocations made: slices taken before one may have moved since

    Arena(Device dev, Buf.Kind kind, long initial) {
        this.dev = dev;
        this.kind = kind;
        this.whole = !dev.slicesScratch();
        if (!whole) {
            blocks.add(alloc(Math.max(ALIGN, initial)));
        }
    }

    /** n elements, contents undefined. */
    Buf take(long n) {
        if (whole) {
            if (current == blocks.size()) {
                blocks.add(alloc(n));
                views.add(new Buf[VIEWS]);
            } else if (blocks.get(current).length() < n) {
                dev.free(blocks.get(current));
                blocks.set(current, alloc(n));
            }
            return view(views.get(current), blocks.get(current++), n);
        }
        long size = (n + ALIGN - 1) / ALIGN * ALIGN;
        while (used + size > blocks.get(current).length()) {
            current++;
            used = 0;
            if (current == blocks.size()) {
                blocks.add(alloc(Math.max(size, blocks.get(current - 1).length())));
            }
        }
        Buf b = blocks.get(current).slice(used, n);
        used += size;
        long inUse = used;
        for (int i = 0; i < current; i++) {
            inUse += blocks.get(i).length();
        }
        peak = Math.max(peak, inUse);
        return b;
    }

    /** block's first n elements: a kept view, else a new one kept in place of the least recent. */
    private static Buf view(Buf[] kept, Buf block, long n) {
        int i = 0;
        while (i < VIEWS - 1 && kept[i] != null && (kept[i].length() != n || kept[i].storage() != block.storage())) {
            i++;
        }
        Buf v = kept[i] != null && kept[i].length() == n && kept[i].storage() == block.storage()
                ? kept[i]
                : block.slice(0, n);
        System.arraycopy(kept, 0, kept, 1, i); // v first, the others in their order
        kept[0] = v;
        return v;
    }

    private Buf alloc(long n) {
        allocations++;
        return dev.alloc(kind, n);
    }

    /** Allocations made so far (what a device graph checks before it replays slices taken earlier). */
    long allocations() {
        return allocations;
    }

    /** Where the next slice would come from. */
    long mark() {
        if (whole) {
            return current;
        }
        return ((long) current << 40) | used;
    }

    /** Gives back every slice taken since mark (they must no longer be used). */
    void release(long mark) {
        if (whole) {
            current = (int) mark;
            return;
        }
        current = (int) (mark >>> 40);
        used = mark & ((1L << 40) - 1);
    }

    /** Gives every slice back; when the last pass needed several blocks, they become one of its high-water mark. */
    void reset() {
        if (!whole && blocks.size() > 1) {
            for (Buf b : blocks) {
                dev.free(b);
            }
            blocks.clear();
            blocks.add(alloc(peak));
        }
        current = 0;
        used = 0;
        peak = 0;
    }

    /** Bytes held. */
    long bytes() {
        long b = 0;
        for (Buf x : blocks) {
            b += x.bytes();
        }
        return b;
    }

    @Override
    public void close() {
        for (Buf b : blocks) {
            dev.free(b);
        }
        blocks.clear();
        views.clear();
    }
}

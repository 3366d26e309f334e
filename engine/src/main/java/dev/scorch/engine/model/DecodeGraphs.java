package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * A whole model's decode steps as device graphs ({@link Device#capture}), one per batch size: the step
 * ({@link DecoderStage#decodeStep}) reads everything that changes between steps from fixed device buffers, written
 * before each launch: the tokens, each row's cache length, and the address table of the rows' caches (rewritten only
 * when the sequences change). Every batch size shares one pass and one set of buffers, sized for the largest batch
 * seen, so the memory is one large step's. A graph holds the addresses it was captured with: it is captured again when
 * any of them has moved since (the buffers or the pass's scratch grew, the cos/sin table grew). A capture follows one
 * uncaptured run of the step, whose result is used (the scratch reaches its size outside the capture).
 */
final class DecodeGraphs implements AutoCloseable {
    private final DecoderStage stage;
    private final Device dev;
    private final Rope rope;
    private final int layers;
    private final int vocab;
    private final Pass pass;
    private final Map<Integer, Graph> graphs = new HashMap<>();
    private int capacity; // rows the buffers hold
    private Buf tokens; // [capacity] I32
    private Buf lengths; // [capacity] I32
    private Buf table; // [layers, capacity] ADDR
    private Buf logits; // [capacity, vocab]
    private GpuKvCache[] bound = new GpuKvCache[0]; // the caches whose layers the table holds, in row order
    private Buf cosSin; // the pass's cos/sin table when the buffers last moved
    private long moves; // counts moves of the buffers and the cos/sin table

    /** One batch size's graph and the {@link #version} it was captured at. */
    private record Graph(DeviceGraph graph, long version) {}

    DecodeGraphs(DecoderStage stage) {
        this.stage = stage;
        this.dev = stage.device();
        this.rope = new Rope(stage.config());
        this.layers = stage.end() - stage.first();
        this.vocab = stage.config().vocabSize();
        this.pass = new Pass(dev);
    }

    /** Changes whenever an address a graph may hold has moved. */
    private long version() {
        return moves + pass.allocations();
    }

    /**
     * Appends tokens[r] to caches[r] (each holding at least one token) and returns the next-token logits [rows,
     * vocab]: the bits of the same step through {@link DecoderStage#forward}.
     */
    float[] decode(int[] ids, GpuKvCache[] caches) {
        int rows = ids.length;
        if (caches.length != rows) {
            throw new IllegalArgumentException(rows + " tokens but " + caches.length + " caches");
        }
        int[] past = new int[rows];
        int maxLength = 0;
        for (int r = 0; r < rows; r++) {
            if (ids[r] < 0 || ids[r] >= vocab) {
                throw new IllegalArgumentException(
                        "token id " + ids[r] + " is outside the vocabulary [0, " + vocab + ")");
            }
            if (caches[r].layers() != layers || caches[r].length() == 0) {
                throw new IllegalArgumentException("a decode step continues a cache of this stage's " + layers
                        + " layers holding tokens; row " + r + "'s holds " + caches[r].layers() + " layers and "
                        + caches[r].length() + " tokens");
            }
            caches[r].reserve(1);
            past[r] = caches[r].length();
            maxLength = Math.max(maxLength, past[r]);
        }
        fit(rows);
        dev.write(tokens, ids, 0, rows);
        dev.write(lengths, past, 0, rows);
        bind(caches);
        Buf cs = pass.cosSin(rope, maxLength + 1);
        if (cs != cosSin) {
            cosSin = cs;
            moves++;
        }
        Graph g = graphs.get(rows);
        if (g != null && g.version() == version()) {
            g.graph().launch();
        } else {
            if (g != null) {
                g.graph().close();
            }
            Pass.DecodeInputs in = new Pass.DecodeInputs(rows, capacity, lengths.slice(0, rows), table);
            PackedBatch shape = shape(rows);
            Buf out = logits.slice(0, (long) rows * vocab);
            Buf tok = tokens.slice(0, rows);
            Runnable step = () -> stage.decodeStep(pass, tok, in, shape, out);
            step.run();
            pass.floats.reset(); // a pass that outgrew its first block gets one block now, not inside the capture
            pass.ints.reset();
            graphs.put(rows, new Graph(dev.capture(step), version()));
        }
        float[] result = new float[rows * vocab];
        dev.read(logits, result, 0, result.length);
        for (GpuKvCache c : caches) {
            c.advance(1);
        }
        return result;
    }

    /** A batch of rows one-token sequences (the step reads only its shape). */
    private static PackedBatch shape(int rows) {
        int[] one = new int[rows];
        int[] start = new int[rows];
        Arrays.fill(one, 1);
        Arrays.setAll(start, i -> i);
        return new PackedBatch(new int[rows], new int[rows], start, one);
    }

    /** Grows the buffers to hold rows (by doubling, so a growing batch moves them a few times). */
    private void fit(int rows) {
        if (rows <= capacity) {
            return;
        }
        freeBuffers();
        capacity = Math.max(rows, 2 * capacity);
        tokens = dev.alloc(Buf.Kind.I32, capacity);
        lengths = dev.alloc(Buf.Kind.I32, capacity);
        table = dev.alloc(Buf.Kind.ADDR, (long) layers * capacity);
        logits = dev.alloc(Buf.Kind.F32, (long) capacity * vocab);
        bound = new GpuKvCache[0];
        moves++;
    }

    /** Writes the address table when the rows' caches are not the ones it holds. */
    private void bind(GpuKvCache[] caches) {
        if (Arrays.equals(bound, caches)) { // GpuKvCache has identity equality
            return;
        }
        Buf[] t = new Buf[layers * capacity];
        for (int l = 0; l < layers; l++) {
            for (int r = 0; r < caches.length; r++) {
                t[l * capacity + r] = caches[r].layer(l);
            }
        }
        for (int i = 0; i < t.length; i++) {
            if (t[i] == null) {
                t[i] = caches[0].layer(0); // rows past the batch: never read, but a valid address
            }
        }
        dev.writeAddresses(table, t);
        bound = caches.clone();
    }

    /** Device bytes held. */
    long bytes() {
        return pass.bytes() + (capacity == 0 ? 0 : tokens.bytes() + lengths.bytes() + table.bytes() + logits.bytes());
    }

    private void freeBuffers() {
        if (capacity > 0) {
            dev.free(tokens);
            dev.free(lengths);
            dev.free(table);
            dev.free(logits);
        }
    }

    @Override
    public void close() {
        for (Graph g : graphs.values()) {
            g.graph().close();
        }
        graphs.clear();
        freeBuffers();
        capacity = 0;
        pass.close();
    }
}

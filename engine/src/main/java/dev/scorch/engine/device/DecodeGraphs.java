package dev.scorch.engine.device;

import dev.scorch.engine.kernels.Rope;
import dev.scorch.engine.runtime.PackedBatch;
import java.util.HashMap;
import java.util.Map;

/**
 * A whole model's decode steps as device graphs ({@link Device#capture}), one per batch size: the step
 * ({@link DecoderStage#decodeStep}) reads everything that changes between steps from fixed device buffers, written
 * before each launch: the tokens, each row's cache length, and the address table of the rows' caches (rewritten only
 * when the sequences change). A batch size's first step runs uncaptured (its scratch reaches its size, the result is
 * used), then is captured; later steps launch the graph. A graph is dropped when the cos/sin table it reads grows.
 * Each batch size keeps its own pass (a graph fixes the scratch addresses it was captured with), its buffers and its
 * graph until the stage closes.
 */
final class DecodeGraphs implements AutoCloseable {
    private final DecoderStage stage;
    private final Device dev;
    private final Rope rope;
    private final Map<Integer, Step> steps = new HashMap<>();

    DecodeGraphs(DecoderStage stage) {
        this.stage = stage;
        this.dev = stage.device();
        this.rope = new Rope(stage.config());
    }

    /** One batch size's step: its pass, its input and output buffers, and its graph once captured. */
    private final class Step implements AutoCloseable {
        final int rows;
        final Pass pass;
        final Buf tokens; // [rows]
        final Pass.DecodeInputs in;
        final Buf logits; // [rows, vocab]
        final PackedBatch shape;
        final GpuKvCache[] bound; // the caches whose layers the address table holds
        final int[] lengths;
        final Runnable run;
        DeviceGraph graph;
        Buf graphCosSin; // the cos/sin table the graph reads

        Step(int rows) {
            this.rows = rows;
            pass = new Pass(dev);
            tokens = dev.alloc(Buf.Kind.I32, rows);
            in = new Pass.DecodeInputs(
                    rows, dev.alloc(Buf.Kind.I32, rows), dev.alloc(Buf.Kind.ADDR, (long) layers() * rows));
            logits = dev.alloc(Buf.Kind.F32, (long) rows * stage.config().vocabSize());
            int[] one = new int[rows];
            int[] start = new int[rows];
            java.util.Arrays.fill(one, 1);
            java.util.Arrays.setAll(start, i -> i);
            shape = new PackedBatch(new int[rows], new int[rows], start, one);
            bound = new GpuKvCache[rows];
            lengths = new int[rows];
            run = () -> stage.decodeStep(pass, tokens, in, shape, logits);
        }

        long bytes() {
            return pass.bytes()
                    + tokens.bytes()
                    + in.lengths().bytes()
                    + in.caches().bytes()
                    + logits.bytes();
        }

        @Override
        public void close() {
            if (graph != null) {
                graph.close();
            }
            pass.close();
            dev.free(tokens);
            dev.free(in.lengths());
            dev.free(in.caches());
            dev.free(logits);
        }
    }

    private int layers() {
        return stage.end() - stage.first();
    }

    /**
     * Appends tokens[r] to caches[r] (each holding at least one token) and returns the next-token logits [rows,
     * vocab]: the bits of the same step through {@link DecoderStage#forward}.
     */
    float[] decode(int[] tokens, GpuKvCache[] caches) {
        int rows = tokens.length;
        int vocab = stage.config().vocabSize();
        if (caches.length != rows) {
            throw new IllegalArgumentException(rows + " tokens but " + caches.length + " caches");
        }
        Step s = steps.computeIfAbsent(rows, Step::new);
        int maxLength = 0;
        for (int r = 0; r < rows; r++) {
            if (tokens[r] < 0 || tokens[r] >= vocab) {
                throw new IllegalArgumentException(
                        "token id " + tokens[r] + " is outside the vocabulary [0, " + vocab + ")");
            }
            if (caches[r].layers() != layers() || caches[r].length() == 0) {
                throw new IllegalArgumentException("a decode step continues a cache of this stage's " + layers()
                        + " layers holding tokens; row " + r + "'s holds " + caches[r].layers() + " layers and "
                        + caches[r].length() + " tokens");
            }
            caches[r].reserve(1);
            s.lengths[r] = caches[r].length();
            maxLength = Math.max(maxLength, s.lengths[r]);
        }
        dev.write(s.tokens, tokens, 0, rows);
        dev.write(s.in.lengths(), s.lengths, 0, rows);
        bind(s, caches);
        Buf cosSin = s.pass.cosSin(rope, maxLength + 1);
        if (s.graph != null && cosSin != s.graphCosSin) {
            s.graph.close();
            s.graph = null;
        }
        if (s.graph == null) {
            s.run.run();
            s.pass.floats.reset(); // a pass that outgrew its first block gets one block now, not inside the capture
            s.pass.ints.reset();
            s.graph = dev.capture(s.run);
            s.graphCosSin = cosSin;
        } else {
            s.graph.launch();
        }
        float[] out = new float[rows * vocab];
        dev.read(s.logits, out, 0, out.length);
        for (GpuKvCache c : caches) {
            c.advance(1);
        }
        return out;
    }

    /** Writes the address table when the rows' caches are not the ones it holds. */
    private void bind(Step s, GpuKvCache[] caches) {
        boolean same = true;
        for (int r = 0; r < s.rows && same; r++) {
            same = s.bound[r] == caches[r];
        }
        if (same) {
            return;
        }
        Buf[] table = new Buf[layers() * s.rows];
        for (int l = 0; l < layers(); l++) {
            for (int r = 0; r < s.rows; r++) {
                table[l * s.rows + r] = caches[r].layer(l);
            }
        }
        dev.writeAddresses(s.in.caches(), table);
        System.arraycopy(caches, 0, s.bound, 0, s.rows);
    }

    /** Device bytes held. */
    long bytes() {
        long b = 0;
        for (Step s : steps.values()) {
            b += s.bytes();
        }
        return b;
    }

    @Override
    public void close() {
        for (Step s : steps.values()) {
            s.close();
        }
        steps.clear();
    }
}

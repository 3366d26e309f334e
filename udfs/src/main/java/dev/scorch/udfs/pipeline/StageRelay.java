package dev.scorch.udfs.pipeline;

import dev.scorch.engine.runtime.PackedBatch;
import java.io.IOException;

/**
 * A stage before the last: receives each batch (the first stage: its token ids, sent round by the last stage; the
 * others: the previous stage's hidden states), runs its layers and sends the batch on with its hidden states, until
 * the end of the stream, which it passes on. Frames must come in order (0, 1, ...) and of the right sort. The sending
 * is done by a {@link StageSender}, so a batch's hidden states are written while the next batch is computed; it holds
 * one frame besides the one being written, so a stage holds at most three batches' hidden states.
 */
final class StageRelay {
    private StageRelay() {}

    /** Relays batches until END; returns how many. afterBatch runs after each (a test's failure hook). */
    static long run(StageRing ring, StageEngine engine, int index, Runnable afterBatch) throws IOException {
        try (StageSender sender = new StageSender(
                ring.down(), 1, "scorch-pipeline-send-to-" + ring.down().peer(), ring::close)) {
            long expected = 0;
            while (true) {
                StageFrame f = sender.receive(ring.up());
                if (f.seq() != expected) {
                    throw new IOException("stage " + index + " expected batch #" + expected + " from "
                            + ring.up().peer() + " but got " + f);
                }
                if (f.kind() == StageFrame.Kind.END) {
                    sender.send(f);
                    sender.flush();
                    return expected;
                }
                if (f.kind() != StageFrame.Kind.BATCH || (f.hidden() == null) != (index == 0)) {
                    throw new IOException("stage " + index + " got " + f + " from "
                            + ring.up().peer() + ": expected " + (index == 0 ? "token ids only" : "hidden states"));
                }
                PackedBatch batch = PipelineScorer.pack(f.seqLen(), f.tokens());
                float[] out = engine.forward(batch, f.hidden());
                sender.send(StageFrame.hidden(f.seq(), f.seqLen(), f.tokens(), out, out.length / f.numTokens()));
                expected++;
                afterBatch.run();
            }
        }
    }
}

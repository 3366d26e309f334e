package dev.scorch.udfs.pipeline;

import dev.scorch.engine.backend.CheckpointBytes;
import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.GemmPrecision;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Which layers each pipeline stage holds, and on which of its devices. Every task tells the others its devices
 * ({@link Devices}, through the barrier's allGather) and computes the same split from the same list. Where every stage
 * holds GPUs the layers go by what the GPUs hold: each GPU's room is its memory less what {@link GpuPlan} keeps off it
 * (RAPIDS pool, reserves, one batch's scratch) and less the embedding on the first GPU and model.norm + lm_head on the
 * last; the layers are split in proportion to room by their checkpoint bytes, first over the stages (each gets at
 * least one layer), then over each stage's GPUs. Stages on HostDevices split evenly by layer count, one device each.
 */
final class StageSplit {
    private StageSplit() {}

    /** A task's devices as it tells the others: its GPUs (0 for a CPU stage) and the smallest one's bytes. */
    record Devices(int gpus, long gpuBytes) {
        String message() {
            return gpus + ":" + gpuBytes;
        }

        static Devices parse(String m, int stage) throws IOException {
            int colon = m.indexOf(':');
            try {
                return new Devices(Integer.parseInt(m.substring(0, colon)), Long.parseLong(m.substring(colon + 1)));
            } catch (RuntimeException e) {
                throw new IOException("stage " + stage + " told its devices as '" + m + "', not gpus:bytes", e);
            }
        }
    }

    /** Tells the other stages mine and returns every stage's devices, by index. */
    static List<Devices> exchange(StageRing.Exchange exchange, Devices mine) throws IOException {
        List<Devices> all = new ArrayList<>();
        for (String m : exchange.allGather(mine.message())) {
            all.add(Devices.parse(m, all.size()));
        }
        return all;
    }

    /**
     * Layers per device of every stage, [stage][device] (a device may get none): by the GPUs' room where every stage
     * holds GPUs, settings giving a stage's margins, else evenly. Throws when a stage would get no layer, or a GPU's
     * layers would not fit it.
     */
    static int[][] of(
            List<Devices> stages,
            ModelConfig c,
            GemmPrecision precision,
            int batchTokens,
            Function<Devices, GpuPlan.Settings> settings) {
        int layers = c.numHiddenLayers();
        int n = stages.size();
        if (n < 1 || n > layers) {
            throw new IllegalArgumentException(
                    n + " pipeline stages for " + layers + " layers: each stage needs a layer");
        }
        int[][] split = new int[n][];
        if (stages.stream().anyMatch(d -> d.gpus() < 1)) {
            for (int i = 0; i < n; i++) {
                int[] r = PipelinePartition.layers(layers, n, i);
                split[i] = evenly(r[1] - r[0], Math.max(1, stages.get(i).gpus()));
            }
            return split;
        }
        CheckpointBytes w = CheckpointBytes.of(c);
        long scratch = GpuMemoryBudget.of(c, precision, false).activationBytes(batchTokens);
        long[][] room = new long[n][];
        long[] nodeRoom = new long[n];
        for (int i = 0; i < n; i++) {
            GpuPlan.Settings s = settings.apply(stages.get(i));
            room[i] = new long[stages.get(i).gpus()];
            for (int g = 0; g < room[i].length; g++) {
                room[i][g] = s.engineBytes(g)
                        - scratch
                        - (i == 0 && g == 0 ? w.embedding() : 0)
                        - (i == n - 1 && g == room[i].length - 1 ? w.head() : 0);
                nodeRoom[i] += Math.max(0, room[i][g]);
            }
        }
        int[] perStage = proportional(w.layers(), 0, layers, nodeRoom, 1);
        for (int i = 0, first = 0; i < n; first += perStage[i++]) {
            split[i] = proportional(w.layers(), first, first + perStage[i], room[i], 0);
            check(w, first, split[i], room[i], i, stages.get(i), layers);
        }
        return split;
    }

    /** count layers over devices, evenly by count; with fewer layers than devices, one each on the first ones. */
    static int[] evenly(int count, int devices) {
        int used = Math.min(count, devices);
        int[] out = new int[devices];
        for (int d = 0; d < used; d++) {
            int[] r = PipelinePartition.layers(count, used, d);
            out[d] = r[1] - r[0];
        }
        return out;
    }

    /**
     * Layers [first, end) over bins in proportion to room: layer l goes to the bin whose share of the room holds the
     * middle of l's bytes in the layers' running total; then each bin gets at least min layers, boundaries moved as
     * little as that takes.
     */
    static int[] proportional(long[] bytes, int first, int end, long[] room, int min) {
        int bins = room.length;
        double totalRoom = 0;
        for (long r : room) {
            totalRoom += Math.max(0, r);
        }
        double totalBytes = 0;
        for (int l = first; l < end; l++) {
            totalBytes += bytes[l];
        }
        int[] bound = new int[bins + 1]; // bin b holds [bound[b], bound[b + 1])
        bound[bins] = end;
        double before = 0;
        double roomBefore = 0;
        int l = first;
        for (int b = 0; b < bins - 1; b++) {
            roomBefore += Math.max(0, room[b]);
            while (l < end && (before + bytes[l] / 2.0) / totalBytes < roomBefore / totalRoom) {
                before += bytes[l++];
            }
            bound[b + 1] = l;
        }
        bound[0] = first;
        for (int b = 1; b < bins; b++) {
            bound[b] = Math.max(bound[b], bound[b - 1] + min);
        }
        for (int b = bins - 1; b > 0; b--) {
            bound[b] = Math.min(bound[b], bound[b + 1] - min);
        }
        int[] out = new int[bins];
        for (int b = 0; b < bins; b++) {
            out[b] = bound[b + 1] - bound[b];
        }
        return out;
    }

    /** Fails when a GPU of stage i is given layers (with the embedding or head) that exceed its room. */
    private static void check(CheckpointBytes w, int first, int[] split, long[] room, int i, Devices d, int layers) {
        for (int g = 0, at = first; g < split.length; at += split[g++]) {
            if (split[g] == 0) {
                continue;
            }
            // The embedding and head go with layer 0 and the last layer, here counted on the GPU that holds them.
            long need = w.layers(at, at + split[g])
                    + (at == 0 && g > 0 ? w.embedding() : 0)
                    + (at + split[g] == layers && g < split.length - 1 ? w.head() : 0);
            if (need > room[g]) {
                throw new IllegalArgumentException(String.format(
                        "pipeline stage %d: layers [%d, %d) need %.1f GB on its GPU %d of %.1f GB, which has %.1f GB"
                                + " for them beside the margins and a batch's scratch: the stages' GPUs do not hold"
                                + " the model (see bin/scorch gpu-budget)",
                        i, at, at + split[g], need / 1e9, g, d.gpuBytes() / 1e9, room[g] / 1e9));
            }
        }
    }
}

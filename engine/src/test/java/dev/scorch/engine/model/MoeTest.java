package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.MoeShape;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.ProfilingDevice;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.nio.file.Path;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The MoE on the device ({@link Moe}: routing, permutation, one grouped GEMM per projection over all experts, the
 * combine) against the per-expert path it replaced, on {@link HostDevice}: the routing read back, each expert's tokens
 * gathered and run through that expert's MLP alone, summed per token in ascending expert id, plus the shared experts.
 * Equal to the bit, in every GEMM precision, with BF16 experts (the conformance model), INT4 (packed) and FP8 (codes).
 */
class MoeTest {
    static final int T = 23;

    @ParameterizedTest
    @EnumSource(GemmPrecision.class)
    void bf16ExpertsEqualThePerExpertPath(GemmPrecision p) {
        check(TestModels.conformanceModel(), p);
    }

    @ParameterizedTest
    @EnumSource(GemmPrecision.class)
    void int4ExpertsEqualThePerExpertPath(GemmPrecision p) {
        check(DemoModels.tinyInt4(), p);
    }

    @ParameterizedTest
    @EnumSource(GemmPrecision.class)
    void fp8ExpertsEqualThePerExpertPath(GemmPrecision p) {
        check(DemoModels.tinyFp8(), p);
    }

    /** The forward reads nothing back and writes nothing from the host unless the routes are asked for. */
    @ParameterizedTest
    @EnumSource(
            value = GemmPrecision.class,
            names = {"BF16X3"})
    void theForwardStaysOnTheDevice(GemmPrecision p) {
        ModelWeights mw = ModelWeights.open(TestModels.conformanceModel());
        ModelConfig c = mw.config();
        ProfilingDevice prof = new ProfilingDevice(new HostDevice());
        Device dev = prof.device();
        DeviceWeights w = new DeviceWeights(mw, dev, p);
        String prefix = WeightLayout.layer(firstMoeLayer(c)) + "mlp.";
        Moe moe = new Moe(w, c, prefix);
        Pass pass = pass(dev, p);
        Buf x = dev.upload(input(c));
        prof.reset();
        moe.forward(pass, x, T, null);
        assertNull(prof.stats().get("read"), prof.stats().keySet().toString());
        assertNull(prof.stats().get("write"), prof.stats().keySet().toString());
        assertNull(prof.stats().get("readInts"), prof.stats().keySet().toString());
        assertNull(prof.stats().get("writeInts"), prof.stats().keySet().toString());
        assertEquals(1, prof.stats().get("moePermute").calls);
        int[] routes = new int[T * c.numExpertsPerTok()];
        prof.reset();
        moe.forward(pass, x, T, routes);
        assertEquals(1, prof.stats().get("readInts").calls); // the routes, asked for
    }

    static void check(Path dir, GemmPrecision p) {
        ModelWeights mw = ModelWeights.open(dir);
        ModelConfig c = mw.config();
        HostDevice dev = new HostDevice();
        DeviceWeights w = new DeviceWeights(mw, dev, p);
        String prefix = WeightLayout.layer(firstMoeLayer(c)) + "mlp.";
        Pass pass = pass(dev, p);
        float[] xh = input(c);
        Buf x = dev.upload(xh);
        int hidden = c.hiddenSize();
        int topK = c.numExpertsPerTok();
        int[] routes = new int[T * topK];
        float[] got = new float[T * hidden];
        dev.read(new Moe(w, c, prefix).forward(pass, x, T, routes), got, 0, got.length);

        // The per-expert path: the router again, then each expert hit over its own tokens.
        MoeShape r = MoeShape.of(c);
        Buf logits = dev.alloc(Buf.Kind.F32, (long) T * r.nRoutedExperts());
        dev.gemm(x, T, hidden, w.fp32(prefix + "gate.weight"), r.nRoutedExperts(), logits, p);
        Buf expertsBuf = dev.alloc(Buf.Kind.I32, (long) T * topK);
        Buf weightsBuf = dev.alloc(Buf.Kind.F32, (long) T * topK);
        dev.moeRoute(logits, w.vector(prefix + "gate.e_score_correction_bias"), T, r, expertsBuf, weightsBuf);
        int[] experts = new int[T * topK];
        float[] weights = new float[T * topK];
        dev.read(expertsBuf, experts, 0, experts.length);
        dev.read(weightsBuf, weights, 0, weights.length);
        assertArrayEquals(experts, routes);
        float[][] out = new float[T * topK][]; // each (token, choice)'s expert output
        int used = 0;
        for (int e = 0; e < r.nRoutedExperts(); e++) {
            int n = 0;
            int[] rows = new int[T];
            int[] pairOf = new int[T];
            for (int i = 0; i < T * topK; i++) {
                if (experts[i] == e) {
                    rows[n] = i / topK;
                    pairOf[n++] = i;
                }
            }
            if (n == 0) {
                continue;
            }
            used++;
            Buf xe = dev.alloc(Buf.Kind.F32, (long) n * hidden);
            dev.gatherRows(x, dev.upload(java.util.Arrays.copyOf(rows, n)), n, hidden, xe);
            Buf ye = pass.mlp(w.mlp(prefix + "experts." + e + ".", hidden), xe, n);
            for (int j = 0; j < n; j++) {
                out[pairOf[j]] = new float[hidden];
                dev.read(ye.slice((long) j * hidden, hidden), out[pairOf[j]], 0, hidden);
            }
        }
        assertTrue(used > 1, "the input reaches more than one expert");
        float[] shared = new float[T * hidden];
        if (c.nSharedExperts() > 0) {
            dev.read(pass.mlp(w.mlp(prefix + "shared_experts.", hidden), x, T), shared, 0, shared.length);
        }
        float[] want = new float[T * hidden];
        for (int t = 0; t < T; t++) {
            for (int col = 0; col < hidden; col++) {
                float a = 0f;
                for (int k = 0; k < topK; k++) {
                    a += weights[t * topK + k] * out[t * topK + k][col];
                }
                want[t * hidden + col] = c.nSharedExperts() > 0 ? a + shared[t * hidden + col] : a;
            }
        }
        assertArrayEquals(want, got, dir.getFileName() + " " + p);
    }

    static int firstMoeLayer(ModelConfig c) {
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            if (c.isMoeLayer(l)) {
                return l;
            }
        }
        throw new AssertionError("no MoE layer");
    }

    static Pass pass(Device dev, GemmPrecision p) {
        Pass pass = new Pass(dev);
        pass.rules(p, DecodeRows.NONE);
        return pass;
    }

    /** Hidden states of the scale a layer sees (the model's RMSNorm output is near unit scale). */
    static float[] input(ModelConfig c) {
        SplittableRandom rnd = new SplittableRandom(28);
        float[] x = new float[T * c.hiddenSize()];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        return x;
    }
}

package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.Mlp;
import dev.scorch.engine.kernels.Linear;
import java.util.ArrayList;
import java.util.List;

/** A checkpoint's tensors uploaded to a device by their Hugging Face names, kept track of so they can all be freed. */
final class DeviceWeights {
    private final ModelWeights w;
    private final Device dev;
    private final GemmPrecision precision;
    private final List<Buf> owned = new ArrayList<>();

    DeviceWeights(ModelWeights w, Device dev, GemmPrecision precision) {
        this.w = w;
        this.dev = dev;
        this.precision = precision;
    }

    /** A linear weight [out, in] in the precision's dtype, or packed when it is INT4 ({@link Device#weight}). */
    Buf linear(String name) {
        return own(dev.weight(precision, w.linear(name)));
    }

    /** Linear weights stacked along out, one GEMM for all of them. */
    Buf stacked(String... names) {
        Linear[] ls = new Linear[names.length];
        for (int i = 0; i < names.length; i++) {
            ls[i] = w.linear(names[i]);
        }
        return own(dev.weight(precision, ls));
    }

    /** A table whose rows are looked up (the token embedding), in the precision's dtype whatever the checkpoint's. */
    Buf table(String name) {
        return own(dev.denseWeight(precision, w.linear(name)));
    }

    /**
     * A linear weight kept in fp32 whatever the precision and the checkpoint's dtype (the MoE router gate; kv_b_proj for
     * the absorbed attention when it is INT4).
     */
    Buf fp32(String name) {
        return own(dev.denseWeight(GemmPrecision.FP32, w.linear(name)));
    }

    /** A SwiGLU MLP's weights: prefix + gate_proj, up_proj (stacked) and down_proj. */
    Mlp mlp(String prefix, int hidden) {
        return new Mlp(
                stacked(prefix + "gate_proj.weight", prefix + "up_proj.weight"),
                linear(prefix + "down_proj.weight"),
                hidden,
                rows(prefix + "gate_proj.weight"));
    }

    /** A norm weight or bias, fp32. */
    Buf vector(String name) {
        return own(dev.upload(w.vector(name)));
    }

    /** out_features of a linear weight. */
    int rows(String name) {
        return w.linear(name).out();
    }

    private Buf own(Buf b) {
        owned.add(b);
        return b;
    }

    void free() {
        for (Buf b : owned) {
            dev.free(b);
        }
        owned.clear();
    }
}

package dev.scorch.engine.device;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.diagnostics.GraphTwin;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The one forwarding mechanism of decorators: every call reaches the handler, composite defaults run on the decorated
 * device call by call, every other method (a fused kernel's default too) goes to the wrapped device whole.
 */
class DeviceDecoratorTest {
    /** Records the name of every call handed to the wrapped device. */
    private static final class Calls extends DeviceDecorator {
        final List<String> names = new ArrayList<>();

        Calls(Device target) {
            super(target);
        }

        @Override
        protected Object call(Method m, Object[] args) throws Throwable {
            names.add(m.getName());
            return forward(m, args);
        }
    }

    @Test
    void compositesRunOnTheDecoratorAndTheRestIsHandedOnWhole() {
        Calls calls = new Calls(new HostDevice());
        Device dev = calls.device();
        Buf x = dev.upload(new float[] {1, 2, 3, 4, 5, 6});
        assertEquals(List.of("alloc", "write"), calls.names); // upload is alloc then write
        Mlp mlp = new Mlp(
                dev.weight(new float[8], GemmPrecision.FP32), dev.weight(new float[4], GemmPrecision.FP32), 2, 2);
        Buf out = dev.alloc(Buf.Kind.F32, 6);
        calls.names.clear();
        PassRules rules = new PassRules(GemmPrecision.FP32, DecodeRows.NONE, n -> dev.alloc(Buf.Kind.F32, n), null);
        dev.mlp(mlp, x, 3, out, rules);
        assertEquals(List.of("alloc", "gemm", "alloc", "swiglu", "gemm"), calls.names);
        Buf qkvA = dev.upload(new float[5]);
        Buf norm = dev.upload(new float[2]);
        Buf kPe = dev.alloc(Buf.Kind.F32, 2);
        Rotary r = new Rotary(dev.upload(new int[] {0}), dev.upload(new float[] {1, 0}));
        calls.names.clear();
        MlaShape s = new MlaShape(1, 1, 0, 2, 0, 2, 1f); // x [1, 5] = [q_a | latent 2 | k_pe 2]
        dev.rmsNormRope(qkvA, 1, norm, 1e-6, s, r, out.slice(0, 2), kPe);
        assertEquals(List.of("rmsNormRope"), calls.names); // a fused kernel's default: handed on whole
        assertTrue(dev.describe().startsWith("host"));
    }

    @Test
    void aDecoratedDeviceIsItselfAndCopiesToAnotherAsTheDevicesItWraps() {
        Device a = new Calls(new HostDevice()).device();
        Device b = new Calls(new HostDevice()).device();
        assertEquals(a, a);
        assertNotEquals(a, b);
        assertEquals(System.identityHashCode(a), a.hashCode());
        Buf src = a.upload(new float[] {7, 8});
        Buf dst = b.alloc(Buf.Kind.F32, 2);
        assertTrue(a.copyTo(src, b, dst, 2)); // heap device to heap device, under the decorators
        float[] got = new float[2];
        b.read(dst, got, 0, 2);
        assertArrayEquals(new float[] {7, 8}, got);
        HostDevice host = new HostDevice();
        assertSame(host, DeviceDecorator.unwrap(new Calls(new Calls(host).device()).device()));
    }

    @Test
    void aGraphTwinComparesAndChecksTheBuffersInsideRecords() {
        GraphTwin twin = new GraphTwin(new HostDevice());
        Device dev = twin.device();
        Buf x = dev.upload(new float[] {1, 0, 0, 1});
        Buf cosSin = dev.upload(new float[] {0, 1});
        Buf[] positions = {dev.upload(new int[] {0, 0})};
        DeviceGraph g = dev.capture(() -> dev.rope(x, 2, 1, 2, 0, 0, 2, new Rotary(positions[0], cosSin)));
        g.launch(); // a record made again with the same buffers is the same argument
        positions[0] = dev.upload(new int[] {0, 0});
        IllegalStateException e = assertThrows(IllegalStateException.class, g::launch);
        assertTrue(e.getMessage().contains("rope") && e.getMessage().contains("argument 7"), e.getMessage());
        DeviceGraph h = dev.capture(() -> dev.rope(x, 2, 1, 2, 0, 0, 2, new Rotary(positions[0], cosSin)));
        dev.free(cosSin);
        e = assertThrows(IllegalStateException.class, h::launch);
        assertTrue(e.getMessage().contains("freed after capture"), e.getMessage());
    }
}

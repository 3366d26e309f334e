package dev.scorch.engine.diagnostics;

import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceDecorator;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A decorator ({@link #device}) that waits for each call to finish and adds its wall time (the host's launch cost plus
 * the device's run time) to a per-operation total, named by the seam's method (reads and writes of ints as readInts
 * and writeInts): where a forward pass spends its time, at the price of one synchronisation per call. Weight uploads,
 * the device's properties and synchronize are not timed. For the device check, not for production runs.
 */
public final class ProfilingDevice extends DeviceDecorator {
    /** Calls and nanoseconds of one operation. */
    public static final class Stat {
        public long calls;
        public long nanos;
    }

    private static final Set<String> UNTIMED = Set.of(("describe totalBytes freeBytes weight denseWeight int4Weight"
                    + " fp8Weight slicesScratch batchesGroups synchronize close")
            .split(" "));

    private final Map<String, Stat> stats = new TreeMap<>();

    public ProfilingDevice(Device dev) {
        super(dev);
    }

    public Map<String, Stat> stats() {
        return stats;
    }

    public void reset() {
        stats.clear();
    }

    @Override
    protected Object call(Method m, Object[] args) throws Throwable {
        String op = m.getName();
        if (op.equals("describe")) {
            return "profiled " + target.describe();
        }
        if (UNTIMED.contains(op)) {
            return forward(m, args);
        }
        if ((op.equals("read") || op.equals("write")) && args[1] instanceof int[]) {
            op += "Ints";
        }
        long t0 = System.nanoTime();
        Object r = forward(m, args);
        target.synchronize();
        Stat s = stats.computeIfAbsent(op, k -> new Stat());
        s.calls++;
        s.nanos += System.nanoTime() - t0;
        return r;
    }
}

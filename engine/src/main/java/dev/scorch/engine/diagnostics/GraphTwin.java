package dev.scorch.engine.diagnostics;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceDecorator;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.device.host.HostDevice;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * The twin of CUDA graph capture over any {@link Device} (a {@link HostDevice} in the tests), as a decorator
 * ({@link #device}): while capturing, each kernel call (a call that returns nothing and is not a host operation) is
 * recorded with its arguments as given, not run (buffers are device memory, read when the graph runs; host numbers are
 * baked, as a CUDA graph bakes kernel parameters), and host reads, writes, allocations, frees and synchronisation are
 * refused; a launch replays the recorded calls. Checking, a launch also records the step again and fails when any call
 * or argument differs from the captured one: a host value that changes between steps reached a kernel, and a real
 * graph would run it with the stale value. A launch fails too when a buffer the graph uses has been freed since (a CUDA
 * graph would read freed memory). A twin has no device-to-device path ({@code copyTo} is false).
 */
public final class GraphTwin extends DeviceDecorator {
    /** Calls refused while capturing. */
    private static final Set<String> HOST =
            Set.of("alloc free zero write read writeAddresses weight denseWeight int4Weight fp8Weight synchronize close"
                    .split(" "));

    private final boolean checking;
    private List<CapturedCall> recording; // while capturing
    private final Set<Object> freed = Collections.newSetFromMap(new IdentityHashMap<>()); // storages given back
    private int captures;
    private int launches;

    /** A checking twin over dev. */
    public GraphTwin(Device dev) {
        this(dev, true);
    }

    /** checking false: launches replay without recording the step again (what a CUDA graph does). */
    public GraphTwin(Device dev, boolean checking) {
        super(dev);
        this.checking = checking;
    }

    /** Graphs captured so far. */
    public int captures() {
        return captures;
    }

    /** Graph launches so far. */
    public int launches() {
        return launches;
    }

    @Override
    protected boolean runsOnProxy(Method m) {
        return !m.getName().equals("capture") && super.runsOnProxy(m);
    }

    @Override
    protected Object call(Method m, Object[] args) throws Throwable {
        String op = m.getName();
        if (op.equals("capture")) {
            return capture((Runnable) args[0]);
        } else if (op.equals("describe")) {
            return "graph twin over " + target.describe();
        } else if (op.equals("copyTo")) {
            return false;
        } else if (HOST.contains(op)) {
            if (recording != null) {
                throw new IllegalStateException(op + " while capturing a device graph: a captured step makes no host"
                        + " reads, writes, allocations or synchronisation (write its inputs before the launch, read its"
                        + " outputs after)");
            }
            if (op.equals("free")) {
                freed.add(((Buf) args[0]).storage());
            }
        } else if (recording != null && m.getReturnType() == void.class) {
            recording.add(new CapturedCall(m, args));
            return null;
        }
        return forward(m, args);
    }

    private List<CapturedCall> record(Runnable step) {
        if (recording != null) {
            throw new IllegalStateException("a device graph is already being captured");
        }
        recording = new ArrayList<>();
        try {
            step.run();
            return recording;
        } finally {
            recording = null;
        }
    }

    private DeviceGraph capture(Runnable step) {
        List<CapturedCall> calls = record(step);
        captures++;
        return new DeviceGraph() {
            private boolean closed;

            @Override
            public void launch() {
                if (closed) {
                    throw new IllegalStateException("launch of a closed device graph");
                }
                if (checking) {
                    compare(calls, record(step));
                }
                for (CapturedCall c : calls) {
                    c.checkLive(freed);
                    replay(c);
                }
                launches++;
            }

            @Override
            public void close() {
                closed = true;
            }
        };
    }

    private void replay(CapturedCall c) {
        try {
            forward(c.method(), c.args());
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IllegalStateException(e);
        }
    }

    /** Fails at the first call or argument of now that differs from the captured one. */
    private static void compare(List<CapturedCall> captured, List<CapturedCall> now) {
        for (int i = 0; i < Math.min(captured.size(), now.size()); i++) {
            captured.get(i).checkSame(i, now.get(i));
        }
        if (captured.size() != now.size()) {
            throw CapturedCall.stale("the step made " + captured.size() + " calls at capture, " + now.size() + " now");
        }
    }
}

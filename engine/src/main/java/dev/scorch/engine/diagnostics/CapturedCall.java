package dev.scorch.engine.diagnostics;

import dev.scorch.engine.device.Buf;
import java.lang.reflect.Method;
import java.lang.reflect.RecordComponent;
import java.util.Arrays;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;

/**
 * A kernel call as {@link GraphTwin} records it: the seam's method and its arguments as given (buffers are device
 * memory, read when the graph runs; host numbers are baked). Two calls are the same when they are one method and their
 * arguments are: buffers by what they address, arrays by their elements, records by their components, the rest by
 * value.
 */
record CapturedCall(Method method, Object[] args) {
    /** Fails, naming the argument, when now (the i-th call of the step recorded again) differs from this one. */
    void checkSame(int i, CapturedCall now) {
        String op = method.getName();
        if (!method.equals(now.method)) {
            throw stale("call " + i + " was " + op + " at capture, is " + now.method.getName() + " now");
        }
        for (int j = 0; j < args.length; j++) {
            if (!same(args[j], now.args[j])) {
                throw stale("call " + i + " (" + op + ") argument " + j + " was " + show(args[j]) + " at capture, is "
                        + show(now.args[j]) + " now");
            }
        }
    }

    static IllegalStateException stale(String what) {
        return new IllegalStateException("stale device graph: " + what + " (a host value that changes between steps"
                + " reached a captured call; it belongs in a device buffer written before each launch)");
    }

    /** Fails when a buffer this call uses (or one an address table it reads points at) is among freed's storages. */
    void checkLive(Set<Object> freed) {
        buffers(args, b -> {
            boolean gone = freed.contains(b.storage());
            if (b.storage() instanceof Buf[] table) {
                for (long i = b.offset(); i < b.offset() + b.length() && !gone; i++) {
                    gone = table[(int) i] != null && freed.contains(table[(int) i].storage());
                }
            }
            if (gone) {
                throw new IllegalStateException(
                        "device graph call " + method.getName() + " uses a buffer freed after capture: " + show(b));
            }
        });
    }

    private static boolean same(Object a, Object b) {
        if (a instanceof Buf x && b instanceof Buf y) {
            return x.storage() == y.storage()
                    && x.kind() == y.kind()
                    && x.offset() == y.offset()
                    && x.length() == y.length();
        }
        if (a instanceof Object[] x && b instanceof Object[] y) {
            if (x.length != y.length) {
                return false;
            }
            for (int i = 0; i < x.length; i++) {
                if (!same(x[i], y[i])) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Record && b != null && a.getClass() == b.getClass()) {
            for (RecordComponent c : a.getClass().getRecordComponents()) {
                if (!same(component(c, a), component(c, b))) {
                    return false;
                }
            }
            return true;
        }
        return Objects.deepEquals(a, b);
    }

    private static Object component(RecordComponent c, Object record) {
        try {
            return c.getAccessor().invoke(record);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String show(Object a) {
        return a instanceof Buf b
                ? b.kind() + " buffer [" + b.offset() + ", +" + b.length() + ")"
                : a instanceof Object[] x ? Arrays.toString(x) : String.valueOf(a);
    }

    /** Each buffer among a call's arguments: inside arrays and records too. */
    private static void buffers(Object a, Consumer<Buf> each) {
        if (a instanceof Buf b) {
            each.accept(b);
        } else if (a instanceof Object[] x) {
            for (Object o : x) {
                buffers(o, each);
            }
        } else if (a instanceof Record) {
            for (RecordComponent c : a.getClass().getRecordComponents()) {
                buffers(component(c, a), each);
            }
        }
    }
}

package dev.scorch.engine.device;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;

/**
 * A {@link Device} wrapped by one forwarding mechanism: {@link #device} is a {@link Proxy} of the seam whose every call
 * reaches this handler, which hands it to the wrapped device ({@link #call}, by default {@link #forward}) or, for a
 * default method marked {@link Device.Composite}, runs the seam's own body on the proxy, so that the calls it is made of
 * come back through the handler one by one. A decorator overrides {@link #call} for what it adds (timing, recording,
 * another weight upload); a kernel added to the seam reaches it with no change here.
 *
 * <p>Each call allocates its argument array (and boxes its numbers): decorators are for diagnostics and tests, not a
 * production hot path.
 */
public abstract class DeviceDecorator implements InvocationHandler {
    private static final Object[] NO_ARGS = {};

    /** The device this decorator wraps. */
    protected final Device target;

    private final Device device;

    protected DeviceDecorator(Device target) {
        this.target = target;
        this.device =
                (Device) Proxy.newProxyInstance(Device.class.getClassLoader(), new Class<?>[] {Device.class}, this);
    }

    /** The decorated device: every call on it goes through this decorator. */
    public final Device device() {
        return device;
    }

    /** The device under d's decorators (d itself when it is not a decorator's). */
    public static Device unwrap(Device d) {
        while (Proxy.isProxyClass(d.getClass()) && Proxy.getInvocationHandler(d) instanceof DeviceDecorator h) {
            d = h.target;
        }
        return d;
    }

    @Override
    public final Object invoke(Object proxy, Method m, Object[] args) throws Throwable {
        if (m.getDeclaringClass() == Object.class) {
            return switch (m.getName()) {
                case "equals" -> proxy == args[0];
                case "hashCode" -> System.identityHashCode(proxy);
                default -> getClass().getSimpleName() + " over " + target;
            };
        }
        Object[] a = args == null ? NO_ARGS : args;
        return runsOnProxy(m) ? InvocationHandler.invokeDefault(proxy, m, a) : call(m, a);
    }

    /** Whether m runs its default body on the decorated device: those marked {@link Device.Composite}. */
    protected boolean runsOnProxy(Method m) {
        return m.isAnnotationPresent(Device.Composite.class);
    }

    /** A call of the seam's (every one but the composites): forwarded to the wrapped device unless overridden. */
    protected Object call(Method m, Object[] args) throws Throwable {
        return forward(m, args);
    }

    /**
     * m with args on the wrapped device, its exception as thrown; a device among args (copyTo's destination) is handed
     * over without its decorators, so that devices of one kind still find each other.
     */
    protected final Object forward(Method m, Object[] args) throws Throwable {
        for (int i = 0; i < args.length; i++) {
            if (args[i] instanceof Device d) {
                args[i] = unwrap(d);
            }
        }
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}

package dev.scorch.engine.model;

import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceDecorator;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.kernels.Linear;
import java.lang.reflect.Method;

/**
 * {@link HostDevice} with every linear weight decoded whole into the precision's dtype ({@link Device#denseWeight}):
 * INT4 weights dequantised on the host and uploaded as plain weights, which a packed INT4 model is compared with.
 */
final class DenseWeightsDevice extends DeviceDecorator {
    private DenseWeightsDevice() {
        super(new HostDevice());
    }

    /** A new one. */
    static Device create() {
        return new DenseWeightsDevice().device();
    }

    @Override
    protected Object call(Method m, Object[] args) throws Throwable {
        if (m.getName().equals("weight") && args[0] instanceof GemmPrecision p && args[1] instanceof Linear[] stacked) {
            return target.denseWeight(p, stacked);
        }
        return forward(m, args);
    }
}

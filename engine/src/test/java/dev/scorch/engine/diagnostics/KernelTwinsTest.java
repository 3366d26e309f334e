package dev.scorch.engine.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.scorch.engine.device.host.HostDevice;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The twin comparison itself: two HostDevices agree exactly on every kernel, and every kernel is covered. */
class KernelTwinsTest {
    @Test
    void hostAgainstHostIsExactAndCoversEveryKernel() {
        Map<String, Double> d = KernelTwins.compare(new HostDevice(), new HostDevice());
        for (Map.Entry<String, Double> e : d.entrySet()) {
            assertEquals(0.0, e.getValue(), e.getKey());
        }
        assertEquals(57, d.size(), d.keySet().toString());
    }
}

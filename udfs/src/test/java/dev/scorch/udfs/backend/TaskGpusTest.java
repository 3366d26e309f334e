package dev.scorch.udfs.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Test;

/** A task's GPU addresses, read from the resources map Spark gives it. */
class TaskGpusTest {
    @Test
    void theGpuResourcesAddressesInSparksOrder() {
        assertEquals(List.of("1"), TaskGpus.addresses(Map.of("gpu", new ResourceInformation("gpu", new String[] {"1"
        }))));
        assertEquals(
                List.of("3", "0"),
                TaskGpus.addresses(Map.of(
                        "gpu",
                        new ResourceInformation("gpu", new String[] {"3", "0"}),
                        "fpga",
                        new ResourceInformation("fpga", new String[] {"f1"}))));
    }

    @Test
    void noGpuResourceMeansNoAddresses() {
        assertEquals(List.of(), TaskGpus.addresses(Map.of()));
        assertEquals(List.of(), TaskGpus.addresses(null));
        assertEquals(List.of(), TaskGpus.addresses(Map.of("fpga", new ResourceInformation("fpga", new String[] {"0"
        }))));
        assertEquals(List.of(), TaskGpus.addresses(Map.of("gpu", new ResourceInformation("gpu", new String[0]))));
        Map<String, ResourceInformation> withNull = new HashMap<>();
        withNull.put("gpu", null);
        assertEquals(List.of(), TaskGpus.addresses(withNull));
    }

    @Test
    void outsideATaskThereAreNone() {
        assertEquals(List.of(), TaskGpus.of(null));
    }

    @Test
    void aCudaTasksOrdinalsAreAllItsAddresses() {
        assertEquals(List.of(2, 0, 1), TaskGpus.ordinals(List.of("2", "0", " 1"), -1));
        assertEquals(List.of(0), TaskGpus.ordinals(List.of(), 0), "none held (--backend cuda, local): the fallback");
        IllegalArgumentException e =
                assertThrows(IllegalArgumentException.class, () -> TaskGpus.ordinals(List.of("0", "gpu1"), 0));
        assertEquals(
                "GPU address 'gpu1' is not a CUDA device ordinal (0, 1, ...): check the executor's GPU discovery script",
                e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TaskGpus.ordinals(List.of("-1"), 0));
    }
}

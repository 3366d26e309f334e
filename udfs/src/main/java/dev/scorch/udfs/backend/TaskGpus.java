package dev.scorch.udfs.backend;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * The GPU addresses Spark assigned to a task: the addresses of its "gpu" resource (spark.task.resource.gpu.amount,
 * addresses from the executor's discovery script), as Spark's strings ("0", "1", ...).
 */
public final class TaskGpus {
    /** Spark's resource name for GPUs. */
    public static final String RESOURCE = "gpu";

    private TaskGpus() {}

    /** The running task's GPU addresses; empty outside a task (tc null) or when the task holds none. */
    public static List<String> of(TaskContext tc) {
        return tc == null ? List.of() : addresses(tc.resourcesJMap());
    }

    /** The "gpu" resource's addresses in a task's resources map, in Spark's order; empty when there is none. */
    public static List<String> addresses(Map<String, ResourceInformation> resources) {
        ResourceInformation gpu = resources == null ? null : resources.get(RESOURCE);
        if (gpu == null || gpu.addresses() == null) {
            return List.of();
        }
        List<String> out = new ArrayList<>(gpu.addresses().length);
        for (String a : gpu.addresses()) {
            if (a != null) {
                out.add(a);
            }
        }
        return Collections.unmodifiableList(out);
    }

    /**
     * The CUDA device ordinals of a CUDA task's GPUs: its addresses as numbers, in Spark's order, or [fallback] when it
     * holds none (--backend cuda in local mode runs on {@code BackendChoice}'s GPU 0). A task holding G of them runs
     * the model as a pipeline over all G. An address that is not an ordinal is an error naming it.
     */
    public static List<Integer> ordinals(List<String> addresses, int fallback) {
        if (addresses == null || addresses.isEmpty()) {
            return List.of(fallback);
        }
        List<Integer> out = new ArrayList<>(addresses.size());
        for (String a : addresses) {
            int n = -1;
            try {
                n = Integer.parseInt(a.trim());
            } catch (NumberFormatException e) {
                // reported below
            }
            if (n < 0) {
                throw new IllegalArgumentException("GPU address '" + a
                        + "' is not a CUDA device ordinal (0, 1, ...): check the executor's GPU discovery script");
            }
            out.add(n);
        }
        return Collections.unmodifiableList(out);
    }
}

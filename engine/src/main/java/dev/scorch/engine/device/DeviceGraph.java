package dev.scorch.engine.device;

/**
 * A device's work recorded once ({@link Device#capture}) and launched many times: on a GPU, a CUDA graph, one launch
 * for a decode step's hundreds of kernels.
 */
public interface DeviceGraph extends AutoCloseable {
    /**
     * The system property that turns device graphs on (-Dscorch.cuda.graphs=true): CUDA devices capture them, and
     * decode steps of a one-device model run as them.
     */
    String GRAPHS = "scorch.cuda.graphs";

    /** Runs the recorded work, in order after what was queued before. */
    void launch();

    @Override
    void close();

    /** A graph of a device that cannot capture: each launch runs step again. */
    static DeviceGraph rerun(Runnable step) {
        return new DeviceGraph() {
            @Override
            public void launch() {
                step.run();
            }

            @Override
            public void close() {}
        };
    }
}

package dev.scorch.engine.checkpoint;

import java.nio.file.Path;
import java.util.Arrays;

/** One entry of a safetensors header: name, dtype, shape and its absolute byte range in {@code file}. */
public record TensorInfo(String name, DType dtype, long[] shape, Path file, long begin, long end) {

    public long numel() {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    public long byteSize() {
        return end - begin;
    }

    public String shapeString() {
        return Arrays.toString(shape);
    }

    public boolean hasShape(long... expected) {
        return Arrays.equals(shape, expected);
    }
}

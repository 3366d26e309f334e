package dev.scorch.engine.checkpoint;

import java.nio.file.Path;
import java.util.Arrays;

/** One entry of a safetensors header: name, dtype, shape and its absolute byte range in {@code file}. */
public record TensorInfo(String name, DType dtype, long[] shape, Path file, long begin, long end) {

    public long numel() {
        return numel(shape);
    }

    /** Elements of a tensor of this shape (1 for a scalar); ArithmeticException where the product overflows. */
    public static long numel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
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

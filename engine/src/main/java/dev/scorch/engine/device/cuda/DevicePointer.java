package dev.scorch.engine.device.cuda;

import org.bytedeco.javacpp.Pointer;

/** A device address as a JavaCPP pointer (for cuBLAS and cudaMemcpy arguments); it owns nothing. */
final class DevicePointer extends Pointer {
    DevicePointer(long address) {
        this.address = address;
    }
}

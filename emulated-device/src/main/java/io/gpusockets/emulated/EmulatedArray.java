package io.gpusockets.emulated;

import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.foreign.MemorySegment;

/**
 * A CUDA array: rows of {@code width} elements, {@code max(height, 1)} of them, packed in host memory
 * of its own (no device address: arrays are reached only through copies and texture objects). The
 * memory is freed by the garbage collector once neither the handle table nor queued work refers to
 * it, so a copy queued before cuArrayDestroy still finds it. Its bytes count in the device's memory in use
 * (a reservation of its context, given back at cuArrayDestroy), as an array's do on a GPU.
 */
final class EmulatedArray {
    final long handle;
    final EmulatedContext context;
    final ArrayDescriptor descriptor;
    final int elementBytes;
    final MemorySegment memory;
    final EmulatedMemory.Reservation reservation;

    EmulatedArray(long handle, EmulatedContext context, ArrayDescriptor descriptor, int elementBytes, MemorySegment memory,
                  EmulatedMemory.Reservation reservation) {
        this.handle = handle;
        this.reservation = reservation;
        this.context = context;
        this.descriptor = descriptor;
        this.elementBytes = elementBytes;
        this.memory = memory;
    }

    long rowBytes() {
        return descriptor.width() * elementBytes;
    }

    long rows() {
        return Math.max(descriptor.height(), 1);
    }
}

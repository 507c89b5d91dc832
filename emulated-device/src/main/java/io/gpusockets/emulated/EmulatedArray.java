package io.gpusockets.emulated;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import java.lang.foreign.MemorySegment;

/**
 * A CUDA array: {@code slices} slices (3D depth, layers, or 6 cubemap faces per layer) of {@code rows}
 * rows of {@code width} elements, packed in host memory of its own (no device address: arrays are
 * reached only through copies, texture and surface objects). The memory is freed by the garbage
 * collector once neither the handle table nor queued work refers to it, so a copy queued before
 * cuArrayDestroy still finds it. Its bytes count in the device's memory in use (a reservation of its
 * context, given back at cuArrayDestroy), as an array's do on a GPU. A level of a mipmapped array has
 * no reservation of its own ({@code reservation} null: its mipmapped array holds it) and {@code owner}
 * names that mipmapped array, which alone may destroy it.
 */
final class EmulatedArray {
    final long handle;
    final EmulatedContext context;
    final Array3DDescriptor descriptor;
    final Array3DDescriptor.Shape shape;
    final int elementBytes;
    final MemorySegment memory;
    final EmulatedMemory.Reservation reservation;
    /** The mipmapped array this is a level of, or 0. */
    final long owner;

    EmulatedArray(long handle, EmulatedContext context, Array3DDescriptor descriptor, int elementBytes, MemorySegment memory,
                  EmulatedMemory.Reservation reservation, long owner) {
        this.handle = handle;
        this.reservation = reservation;
        this.context = context;
        this.descriptor = descriptor;
        this.shape = descriptor.shape();
        this.elementBytes = elementBytes;
        this.memory = memory;
        this.owner = owner;
    }

    long width() {
        return descriptor.width();
    }

    long rowBytes() {
        return descriptor.width() * elementBytes;
    }

    long rows() {
        return descriptor.rows();
    }

    long slices() {
        return descriptor.slices();
    }

    long sliceBytes() {
        return rowBytes() * rows();
    }

    /** Whether the array was made for surface loads and stores (CUDA_ARRAY3D_SURFACE_LDST). */
    boolean surfaceLoadStore() {
        return (descriptor.flags() & Array3DDescriptor.SURFACE_LDST) != 0;
    }
}

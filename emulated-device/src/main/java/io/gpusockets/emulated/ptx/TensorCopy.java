package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The tile-mode tensor (TMA) copies of both engines (Insn.TENSOR_COPY), done at once when a thread issues them: a box of
 * a tensor described by a map in this device's layout ({@link TensorMapLayout}), read from the kernel's parameters
 * (a {@code __grid_constant__ const CUtensorMap}, by its .param address or cvta.param's generic one) or from global
 * memory.
 *
 * <p>The box starts at the instruction's coordinates (signed, innermost first) and takes ceil(boxDim[k] /
 * elementStrides[k]) elements along dimension k, every elementStrides[k]-th one (dimension 0 always takes each: cuda.h
 * says TMA ignores its element stride without interleave). In shared memory the box is dense, innermost dimension
 * first. A load fills elements outside the tensor with zero (a NaN for floating types when the map asks for
 * NAN_REQUEST_ZERO_FMA) and completes the whole box's bytes on the mbarrier (mbarrier::complete_tx::bytes); a store
 * (bulk_group) writes only the elements inside the tensor; a reduction (cp.reduce) combines them with global memory
 * under the lock the engines' atomics take.
 *
 * <p>Swizzling permutes each 16-byte chunk of shared memory within its span of 32, 64 or 128 bytes: cuda.h's
 * CUtensorMapSwizzle comments ("Swizzle 16B chunks within 32B/64B/128B span") and the swizzle section of NVIDIA's CUDA
 * C++ Programming Guide (tensor memory access) give the pattern as the chunk index XOR the 128-byte row index, taken
 * from the shared-memory address: 128B XORs address bits [4:6] with bits [7:9], 64B bits [4:5] with [7:8], 32B bit 4
 * with bit 7 (CUTLASS names the same functions Swizzle&lt;3,4,3&gt;, &lt;2,4,3&gt;, &lt;1,4,3&gt;). The shared address must be
 * 128-byte aligned (the guide's requirement for TMA). Interleaved layouts, im2col maps, the 128B_ATOM swizzles and the
 * packed 16U4/16U6 types fail the launch with CUDA_ERROR_NOT_SUPPORTED saying which.
 */
final class TensorCopy {
    /** What an engine lets a copy touch, as one of its lanes: loads and stores checked as that lane's. */
    interface Access {
        /** A load from Insn.GLOBAL, SHARED or PARAM (a parameter offset). */
        long load(int space, long address, int size);

        void store(int space, long address, int size, long value);

        /** Bytes of the launch's parameters (a .param address lies below it). */
        long paramBytes();
    }

    private TensorCopy() {
    }

    /** Instruction {@code in} of a thread: [smem], the map at generic address {@code map}, the mbarrier at {@code bar}. */
    static void execute(Insn in, long smem, long map, long bar, long[] coords, Access a, GlobalMemory memory) {
        TensorMapLayout.Map m = readMap(map, a, memory);
        if (m.rank() != coords.length) {
            throw memory.fault("cp.async.bulk.tensor." + coords.length + "d with a tensor map of rank " + m.rank());
        }
        supported(m, memory);
        if ((smem & 127) != 0) {
            throw memory.misaligned(smem, 128);
        }
        int rank = m.rank(), esz = m.elementBytes();
        int[] n = new int[rank];
        long boxElements = 1;
        for (int k = 0; k < rank; k++) {
            int step = k == 0 ? 1 : m.elementStrides()[k];
            n[k] = (m.box()[k] + step - 1) / step;
            boxElements *= n[k];
        }
        int[] j = new int[rank];
        for (long e = 0; e < boxElements; e++) {
            boolean inside = true;
            long global = m.address();
            for (int k = 0; k < rank; k++) {
                long c = coords[k] + (long) j[k] * (k == 0 ? 1 : m.elementStrides()[k]);
                inside &= c >= 0 && c < m.dims()[k];
                global += c * (k == 0 ? esz : m.strides()[k]);
            }
            long shared = swizzle(smem + e * esz, m.swizzle());
            switch (in.mod) {
                case Insn.TENSOR_LOAD -> a.store(Insn.SHARED, shared, esz,
                        inside ? a.load(Insn.GLOBAL, global, esz) : outsideValue(m));
                case Insn.TENSOR_STORE -> {
                    if (inside) {
                        a.store(Insn.GLOBAL, global, esz, a.load(Insn.SHARED, shared, esz));
                    }
                }
                default -> {
                    if (inside) {
                        long v = a.load(Insn.SHARED, shared, esz);
                        synchronized (Cta.GLOBAL_ATOMICS) {
                            a.store(Insn.GLOBAL, global, esz, reduce(in.mod, m.dataType(), a.load(Insn.GLOBAL, global, esz), v, memory));
                        }
                    }
                }
            }
            for (int k = 0; k < rank && ++j[k] == n[k]; k++) {
                j[k] = 0;
            }
        }
        if (in.mod == Insn.TENSOR_LOAD) {
            if ((bar & 7) != 0) {
                throw memory.misaligned(bar, 8);
            }
            a.store(Insn.SHARED, bar, 8, Mbarrier.completeTx(a.load(Insn.SHARED, bar, 8), boxElements * esz));
        }
    }

    /** The shared address {@code address} after swizzle mode {@code mode} (NONE, 32B, 64B, 128B). */
    static long swizzle(long address, int mode) {
        long bits = switch (mode) {
            case TensorMapLayout.SWIZZLE_32B -> 0x10;
            case TensorMapLayout.SWIZZLE_64B -> 0x30;
            case TensorMapLayout.SWIZZLE_128B -> 0x70;
            default -> 0;
        };
        return address ^ (address >>> 3 & bits);
    }

    private static TensorMapLayout.Map readMap(long map, Access a, GlobalMemory memory) {
        int space;
        long address;
        if (Long.compareUnsigned(map - Builders.PARAM_WINDOW, Builders.WINDOW_BYTES) < 0) {
            space = Insn.PARAM;
            address = map - Builders.PARAM_WINDOW;
        } else if (Long.compareUnsigned(map, a.paramBytes()) < 0) {
            space = Insn.PARAM;   // a kernel parameter's .param address (mov of its name)
            address = map;
        } else if (Long.compareUnsigned(map - Builders.SHARED_WINDOW, Builders.WINDOW_BYTES) < 0
                || Long.compareUnsigned(map - Builders.LOCAL_WINDOW, Builders.WINDOW_BYTES) < 0) {
            throw memory.fault("a tensor map in shared or local memory (PTX takes one in .param, .const or .global): 0x"
                    + Long.toHexString(map));
        } else {
            space = Insn.GLOBAL;
            address = map;
            if ((map & 63) != 0) {
                throw memory.misaligned(map, 64);
            }
        }
        long[] words = new long[TensorMapLayout.SIZE / 8];
        for (int i = 0; i < words.length; i++) {
            words[i] = a.load(space, address + 8L * i, 8);
        }
        MemorySegment bytes = MemorySegment.ofArray(words);
        if (!TensorMapLayout.valid(bytes)) {
            throw memory.fault("the tensor map at 0x" + Long.toHexString(map) + " was not written by cuTensorMapEncode* "
                    + "of this device (magic 0x" + Integer.toHexString(bytes.get(ValueLayout.JAVA_INT_UNALIGNED, 0)) + ")");
        }
        return TensorMapLayout.read(bytes);
    }

    private static void supported(TensorMapLayout.Map m, GlobalMemory memory) {
        String missing = m.kind() != TensorMapLayout.KIND_TILED ? "an im2col tensor map"
                : m.interleave() != TensorMapLayout.INTERLEAVE_NONE ? "an interleaved tensor map (16B/32B)"
                : m.swizzle() > TensorMapLayout.SWIZZLE_128B ? "the 128B_ATOM swizzle modes"
                : m.dataType() >= TensorMapLayout.TYPE_16U4_ALIGN8B ? "the packed 16U4/16U6 data types" : null;
        if (missing != null) {
            throw memory.unsupported("cp.async.bulk.tensor with " + missing + " is not emulated (tile mode with swizzle "
                    + "NONE/32B/64B/128B is)");
        }
    }

    /** An element outside the tensor: zero, or for floating types with NAN_REQUEST_ZERO_FMA a quiet NaN. */
    private static long outsideValue(TensorMapLayout.Map m) {
        if (m.oobFill() == 0) {
            return 0;
        }
        return switch (m.dataType()) {
            case 6 -> 0x7E00L;   // f16
            case 9 -> 0x7FC0L;   // bf16
            case 8 -> 0x7FF8_0000_0000_0000L;
            default -> 0x7FC0_0000L;
        };
    }

    /** cp.reduce's .add/.min/.max of {@code v} into {@code old} by the map's data type. */
    private static long reduce(int op, int type, long old, long v, GlobalMemory memory) {
        return switch (type) {
            case 2, 4 -> switch (op) {   // u32, u64 (u32 values are zero-extended)
                case Insn.TENSOR_REDUCE_ADD -> old + v;
                case Insn.TENSOR_REDUCE_MIN -> Long.compareUnsigned(old, v) <= 0 ? old : v;
                default -> Long.compareUnsigned(old, v) >= 0 ? old : v;
            };
            case 3 -> switch (op) {   // s32
                case Insn.TENSOR_REDUCE_ADD -> (old + v) & 0xFFFF_FFFFL;
                case Insn.TENSOR_REDUCE_MIN -> Math.min((int) old, (int) v) & 0xFFFF_FFFFL;
                default -> Math.max((int) old, (int) v) & 0xFFFF_FFFFL;
            };
            case 5 -> switch (op) {   // s64
                case Insn.TENSOR_REDUCE_ADD -> old + v;
                case Insn.TENSOR_REDUCE_MIN -> Math.min(old, v);
                default -> Math.max(old, v);
            };
            case 7 -> {   // f32: .add only
                if (op != Insn.TENSOR_REDUCE_ADD) {
                    throw memory.unsupported("cp.reduce.async.bulk.tensor .min/.max of f32 (PTX has none)");
                }
                yield Float.floatToRawIntBits(Float.intBitsToFloat((int) old) + Float.intBitsToFloat((int) v)) & 0xFFFF_FFFFL;
            }
            case 8 -> {   // f64: .add
                if (op != Insn.TENSOR_REDUCE_ADD) {
                    throw memory.unsupported("cp.reduce.async.bulk.tensor .min/.max of f64 (PTX has none)");
                }
                yield Double.doubleToRawLongBits(Double.longBitsToDouble(old) + Double.longBitsToDouble(v));
            }
            default -> throw memory.unsupported("cp.reduce.async.bulk.tensor of CUtensorMapDataType " + type
                    + " (u32, s32, u64, s64, f32 and f64 are emulated)");
        };
    }
}
